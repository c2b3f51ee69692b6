import type { IncomingMessage, ServerResponse } from 'node:http';
import type { SandboxHost } from '@switchyard/sandbox';
import type { AnyRequest, AnyResponse, RequestHandler, WatchHandler } from '@switchyard/agent';
import { flushingEventStreams, wholeWhenQuick } from './answers.ts';

const REST_PATH = /^\/(weight|sandboxes|sessions)(\/|$)/;

/**
 * The runtime's HTTP surface, the same through the tunnel (http2 compat
 * objects) and on the direct listener: `/mcp`, `/watch`, the REST parity
 * routes, `/metrics` (reached as `/api/proxy/<runtime>/metrics` on any
 * scheduler) and `/healthz`.
 */
export function runtimeRouter(
  host: SandboxHost,
  watch: WatchHandler,
  metrics: (req: IncomingMessage, res: ServerResponse) => void,
): RequestHandler {
  const route = (req: AnyRequest, res: AnyResponse): void => {
    const path = (req.url ?? '/').split('?', 1)[0]!;
    if (path === '/mcp') {
      const shaped =
        req.method === 'GET' ? flushingEventStreams(res) : req.method === 'POST' ? wholeWhenQuick(res) : res;
      return void host.handleMcp(req, shaped as never);
    }
    // Both request kinds share what the handlers use; the overloads only keep callers honest.
    if (path === '/watch') return watch(req as IncomingMessage, res as ServerResponse);
    if (REST_PATH.test(path)) return void host.handleRest(req, res as never);
    if (path === '/metrics') return metrics(req as IncomingMessage, res as ServerResponse);
    const status = path === '/healthz' ? 200 : 404;
    const body = JSON.stringify(status === 200 ? { status: 'ok' } : { error: `no route for ${path}` });
    const out = res as ServerResponse;
    out.writeHead(status, { 'content-type': 'application/json' });
    out.end(body);
  };
  return route as RequestHandler;
}
