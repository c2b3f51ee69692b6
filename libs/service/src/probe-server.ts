// A listener of its own for kubelet probes and Prometheus, beside a port that
// a flood of connections can hold full (capConnections): the kubelet restarts
// a pod whose liveness probe it cannot deliver for 30 s, ending everything
// the pod holds, and a scrape refused there misses the very refusals it
// should report.
import type { IncomingMessage, RequestListener, Server, ServerResponse } from 'node:http';
import type { Registry } from 'prom-client';
import { INTERNAL_HEADERS_TIMEOUT_MS, deadlineOptions } from './http.ts';
import { metricsHandler } from './metrics.ts';

type Handler = (req: IncomingMessage, res: ServerResponse) => void;

export interface ProbeRoutes {
  /** Liveness: answers while the process does. */
  readonly healthz: Handler;
  /** Readiness, served when given (a port whose readiness is another's leaves it out). */
  readonly readyz?: Handler;
  /** `/metrics` from this registry, served when given. */
  readonly registry?: Registry;
}

export interface ProbeServerOptions extends ProbeRoutes {
  readonly registry: Registry;
}

function routesOf(o: ProbeRoutes): Map<string, Handler> {
  const routes = new Map<string, Handler>([['/healthz', o.healthz]]);
  if (o.readyz) routes.set('/readyz', o.readyz);
  if (o.registry) routes.set('/metrics', metricsHandler(o.registry));
  return routes;
}

const pathOf = (req: IncomingMessage): string => (req.url ?? '/').split('?', 1)[0] ?? '/';

/**
 * `app` with the probes in front: `/healthz`, `/readyz` and `/metrics` (each
 * when given) are answered here, every other path by `app`. For a port that
 * serves them beside its own routes (a gateway's /mcp without metricsPort,
 * the local cluster's gateway).
 */
export function withProbes(app: Handler, o: ProbeRoutes): Handler {
  const routes = routesOf(o);
  return (req, res) => (routes.get(pathOf(req)) ?? app)(req, res);
}

/**
 * A plain-HTTP server (not yet listening) answering `/metrics` from
 * `registry`, `/healthz`, and `/readyz` when given; 404 for anything else,
 * naming what it serves. A request (none has a body) must arrive whole
 * within INTERNAL_HEADERS_TIMEOUT_MS: whoever reaches the port cannot hold
 * connections to it for long (see deadlineOptions). Not covered: it asks for no credentials, so bind it
 * where only the kubelet and Prometheus reach it (the pod IP, not a
 * published Service port).
 */
export function createProbeServer(o: ProbeServerOptions): Server {
  const routes = routesOf(o);
  const served = [...routes.keys()].join(', ');
  const handler: RequestListener = (req, res) => {
    const route = routes.get(pathOf(req));
    if (route) return route(req, res);
    res.writeHead(404, { 'content-type': 'text/plain' }).end(`not found: this port serves ${served}\n`);
  };
  // Not `import http from 'node:http'`, which builds the module's ESM namespace and with it Node's bundled
  // fetch (see apps/gateway/src/main.ts).
  const deadlines = deadlineOptions({ requestTimeoutMs: INTERNAL_HEADERS_TIMEOUT_MS });
  return process.getBuiltinModule('node:http').createServer(deadlines, handler);
}
