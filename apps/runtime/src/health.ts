// The runtime's health listener: kubelet probes and Prometheus reach a
// runtime here, on its own pod, rather than through a scheduler whose
// tunnel may be the very thing that is down.
import http from 'node:http';
import { metricsHandler, type Lifecycle, type Metrics } from '@switchyard/service';

export interface HealthOptions {
  readonly lifecycle: Lifecycle;
  readonly metrics: Metrics;
}

/**
 * `/healthz` answers while the process does (liveness: a runtime cut off
 * from every scheduler is not helped by a restart); `/readyz` is the
 * lifecycle's, to which the runtime adds its tunnel, so a rollout waits for
 * each new runtime to join before it replaces the next; `/metrics` is the
 * runtime's registry.
 */
export function createHealthServer(o: HealthOptions): http.Server {
  const serveMetrics = metricsHandler(o.metrics.registry);
  return http.createServer((req, res) => {
    const path = (req.url ?? '/').split('?', 1)[0];
    if (path === '/healthz') return o.lifecycle.healthzHandler(req, res);
    if (path === '/readyz') return o.lifecycle.readyzHandler(req, res);
    if (path === '/metrics') return serveMetrics(req, res);
    res.writeHead(404).end();
  });
}
