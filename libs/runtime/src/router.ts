import type { IncomingMessage, ServerResponse } from 'node:http';
import type { SandboxHost } from '@switchyard/sandbox';
import type { AnyRequest, AnyResponse, RequestHandler, WatchHandler } from '@switchyard/agent';

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
    if (path === '/mcp')
      return void host.handleMcp(req, req.method === 'GET' ? flushingEventStreams(res) : (res as never));
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

/**
 * On HTTP/1.1 Node sends a response head with the first body write. A
 * legacy GET stream may stay silent for minutes, and a proxy in front (a
 * gateway in direct mode) waits for the head before it answers its own
 * client; so a GET's event stream head goes out at once, as HTTP/2 (the
 * tunnel) sends HEADERS. POST answers keep head and first event in one write.
 */
function flushingEventStreams(res: AnyResponse): AnyResponse {
  if ('stream' in res) return res;
  const out = res as ServerResponse;
  const writeHead = out.writeHead.bind(out) as (status: number, headers?: Record<string, string>) => ServerResponse;
  out.writeHead = ((status: number, headers?: Record<string, string>) => {
    writeHead(status, headers);
    if (isEventStream(headers)) out.flushHeaders();
    return out;
  }) as ServerResponse['writeHead'];
  return res;
}

function isEventStream(headers: Record<string, string> | undefined): boolean {
  for (const [name, value] of Object.entries(headers ?? {})) {
    if (name.toLowerCase() === 'content-type') return String(value).startsWith('text/event-stream');
  }
  return false;
}
