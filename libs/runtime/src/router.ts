import type { SandboxHost } from '@switchyard/sandbox';
import type { RequestHandler, WatchHandler } from '@switchyard/agent';

type AnyHandler = Parameters<RequestHandler>;

const REST_PATH = /^\/(weight|sandboxes|sessions)(\/|$)/;

/**
 * The runtime's HTTP surface, the same through the tunnel (http2 compat
 * objects) and on the direct listener: `/mcp`, `/watch`, the REST parity
 * routes and `/healthz`.
 */
export function runtimeRouter(
  host: SandboxHost,
  watch: WatchHandler,
): (req: AnyHandler[0], res: AnyHandler[1]) => void {
  return (req, res) => {
    const path = (req.url ?? '/').split('?', 1)[0]!;
    if (path === '/mcp') {
      void host.handleMcp(req, res as never);
      return;
    }
    if (path === '/watch') return watch(req, res);
    if (REST_PATH.test(path)) {
      void host.handleRest(req, res as never);
      return;
    }
    const status = path === '/healthz' ? 200 : 404;
    const body = JSON.stringify(status === 200 ? { status: 'ok' } : { error: `no route for ${path}` });
    const out = res as {
      writeHead(status: number, headers: Record<string, string>): unknown;
      end(body: string): unknown;
    };
    out.writeHead(status, { 'content-type': 'application/json' });
    out.end(body);
  };
}
