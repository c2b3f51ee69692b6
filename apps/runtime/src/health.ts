// The runtime's health listener: kubelet probes and Prometheus reach a
// runtime here, on its own pod, rather than through a scheduler whose
// tunnel may be the very thing that is down.
import http from 'node:http';
import { metricsHandler, type Lifecycle, type Metrics } from '@switchyard/service';

export interface HealthOptions {
  readonly lifecycle: Lifecycle;
  /** True while the tunnel to a scheduler is open. */
  readonly connected: () => boolean;
  readonly metrics: Metrics;
}

function reply(res: http.ServerResponse, status: number, body: object): void {
  res.writeHead(status, { 'content-type': 'application/json', 'cache-control': 'no-store' });
  res.end(JSON.stringify(body));
}

/**
 * `/healthz` answers while the process does (liveness: a runtime cut off
 * from every scheduler is not helped by a restart); `/readyz` only while it
 * is up, not draining and its tunnel is open, so a rollout waits for each
 * new runtime to join before it replaces the next; `/metrics` is the
 * runtime's registry.
 */
export function createHealthServer(o: HealthOptions): http.Server {
  const serveMetrics = metricsHandler(o.metrics.registry);
  return http.createServer((req, res) => {
    const path = (req.url ?? '/').split('?', 1)[0];
    if (path === '/healthz') return o.lifecycle.healthzHandler(req, res);
    if (path === '/readyz') {
      if (!o.lifecycle.ready) return o.lifecycle.readyzHandler(req, res);
      return o.connected() ? reply(res, 200, { status: 'ready' }) : reply(res, 503, { status: 'disconnected' });
    }
    if (path === '/metrics') return serveMetrics(req, res);
    reply(res, 404, { error: `no route for ${req.method} ${path}`, code: 'not_found' });
  });
}
