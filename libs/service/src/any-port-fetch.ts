import type { Agent, IncomingMessage } from 'node:http';
import { Readable } from 'node:stream';

// Not `import http from 'node:http'`: a namespace import reads every export, and three (WebSocket, CloseEvent,
// MessageEvent) are getters that load Node's fetch, about 2 MB of RSS in every process that imports this lib
// (the gateway among them), used or not. getBuiltinModule hands over the module as it is.
const http = process.getBuiltinModule('node:http');
const https = process.getBuiltinModule('node:https');

/** Statuses whose answer has no body, which a Response refuses to be given one. */
const BODILESS_STATUSES = new Set([101, 103, 204, 205, 304]);
const REDIRECT_STATUSES = new Set([301, 302, 303, 307, 308]);
/** As fetch: a twenty-first redirect is a failure. */
const REDIRECTS_MAX = 20;
/** Not sent on to another origin, as fetch does not send them. */
const CREDENTIAL_HEADERS = ['authorization', 'cookie', 'proxy-authorization'];

/** fetch's init, and the agent (a pool of connections) each exchange goes through. */
export interface AnyPortInit extends RequestInit {
  /**
   * The node:http(s) agent for an exchange with `url` (the first, or a
   * redirect's), of that URL's protocol: e.g. the keep-alive pool a caller
   * holds for a peer. Undefined, or this left out: Node's global agent.
   */
  readonly agent?: (url: URL) => Agent | undefined;
}

/**
 * fetch() as the MCP SDK's transports and jose call it, made with node:http(s):
 * Node's fetch refuses the ports browsers block (6000, 6665-6669, 10080, …)
 * before it dials, with only "bad port" to say, and a server on one is a
 * legitimate deployment. It fails as fetch does: a connection's or TLS
 * handshake's failure is a TypeError "fetch failed" whose cause is the
 * socket's error; an aborted `signal` rejects with its reason, and ends a
 * body being read. Redirects are followed as fetch follows them (`redirect`
 * "follow", the default: at most 20, credentials not sent to another
 * origin, a 303, or a 301/302 to a POST, becomes a GET without body), or
 * answered (`manual`) or refused (`error`). Not done: a Request as input,
 * a body that is neither a string nor bytes, decompression (none is asked
 * for), cookies, caches, CORS.
 */
export async function anyPortFetch(input: string | URL | Request, init: AnyPortInit = {}): Promise<Response> {
  if (input instanceof Request) throw new TypeError('anyPortFetch takes a URL, not a Request');
  let url = new URL(input);
  let method = (init.method ?? 'GET').toUpperCase();
  let body = bodyOf(init.body);
  const headers = new Headers(init.headers);
  const signal = init.signal ?? undefined;
  for (let redirects = 0; ; redirects++) {
    const response = await exchange(url, { method, headers, agent: init.agent?.(url) }, body, signal);
    const location = response.headers.get('location');
    if (!REDIRECT_STATUSES.has(response.status) || location === null || init.redirect === 'manual') return response;
    await response.body?.cancel();
    if (init.redirect === 'error') throw failed(new Error(`redirected to ${location}`));
    if (redirects === REDIRECTS_MAX) throw failed(new Error('redirect count exceeded'));
    const next = new URL(location, url);
    if (next.origin !== url.origin) for (const name of CREDENTIAL_HEADERS) headers.delete(name);
    const toGet = response.status === 303 ? method !== 'HEAD' : response.status <= 302 && method === 'POST';
    if (toGet) {
      method = 'GET';
      body = undefined;
      headers.delete('content-type');
    }
    url = next;
  }
}

function bodyOf(body: RequestInit['body']): string | Uint8Array | undefined {
  if (body === undefined || body === null) return undefined;
  if (typeof body === 'string' || body instanceof Uint8Array) return body;
  throw new TypeError('anyPortFetch sends a string or bytes as a body, nothing else');
}

function failed(cause: unknown): TypeError {
  return new TypeError('fetch failed', { cause });
}

interface Sent {
  readonly method: string;
  readonly headers: Headers;
  readonly agent: Agent | undefined;
}

function exchange(
  url: URL,
  { method, headers, agent }: Sent,
  body: string | Uint8Array | undefined,
  signal: AbortSignal | undefined,
): Promise<Response> {
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    return Promise.reject(failed(new Error(`${url.protocol} is not http or https`)));
  }
  if (signal?.aborted) return Promise.reject(signal.reason);
  return new Promise((resolve, reject) => {
    const sent: Record<string, string> = Object.fromEntries(headers);
    if (body !== undefined) sent['content-length'] = String(Buffer.byteLength(body));
    const req = (url.protocol === 'https:' ? https : http).request(url, { method, headers: sent, agent });
    let res: IncomingMessage | undefined;
    const onAbort = (): void => {
      req.destroy();
      res?.destroy(signal!.reason);
      reject(signal!.reason);
    };
    signal?.addEventListener('abort', onAbort, { once: true });
    const settled = (): void => signal?.removeEventListener('abort', onAbort);
    req.once('error', (error) => {
      settled();
      reject(failed(error));
    });
    req.once('response', (answer) => {
      res = answer;
      answer.once('close', settled);
      resolve(responseOf(answer, method));
    });
    req.end(body);
  });
}

function responseOf(res: IncomingMessage, method: string): Response {
  const headers = new Headers();
  for (let i = 0; i + 1 < res.rawHeaders.length; i += 2) headers.append(res.rawHeaders[i]!, res.rawHeaders[i + 1]!);
  const status = res.statusCode ?? 0;
  const init = { status, statusText: res.statusMessage ?? '', headers };
  if (BODILESS_STATUSES.has(status) || method === 'HEAD') {
    res.resume();
    return new Response(null, init);
  }
  const body = Readable.toWeb(res) as ReadableStream<Uint8Array>;
  if (status >= 200 && status <= 599) return new Response(body, init);
  // A Response refuses any other status (a broken server's 999), where fetch answers with it.
  const response = new Response(body, { ...init, status: 500 });
  Object.defineProperty(response, 'status', { value: status });
  return response;
}
