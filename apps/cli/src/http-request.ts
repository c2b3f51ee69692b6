import { Readable } from 'node:stream';
import { request } from 'undici';

/** What the commands send: a subset of fetch's RequestInit. */
export interface HttpInit {
  readonly method?: string;
  readonly headers?: HeadersInit;
  readonly body?: string;
  readonly signal?: AbortSignal;
}

/** Statuses whose answer has no body, which a Response refuses to be given one. */
const BODILESS_STATUSES = new Set([204, 205, 304]);

/**
 * One HTTP exchange, answered as fetch() answers it (a web Response), but
 * made with undici's request API: fetch refuses the ports browsers block
 * (6000, 6665-6669, 10080, …) before it dials, with only "bad port" to say,
 * and a scheduler or gateway served on one is a legitimate deployment.
 * Unlike fetch, redirects are not followed (neither app sends one), and a
 * failure is the connection's or TLS handshake's own error, not a "fetch
 * failed" wrapping it. `signal` bounds the body as well as the headers.
 */
export async function httpRequest(url: string | URL, init: HttpInit = {}): Promise<Response> {
  const { statusCode, headers, body } = await request(url, {
    method: (init.method ?? 'GET') as 'GET',
    headers: Object.fromEntries(new Headers(init.headers)),
    ...(init.body !== undefined ? { body: init.body } : {}),
    ...(init.signal ? { signal: init.signal } : {}),
  });
  const answered = new Headers();
  for (const [name, value] of Object.entries(headers)) {
    for (const one of Array.isArray(value) ? value : [value]) if (one !== undefined) answered.append(name, one);
  }
  if (BODILESS_STATUSES.has(statusCode)) {
    body.destroy();
    return new Response(null, { status: statusCode, headers: answered });
  }
  const stream = Readable.toWeb(body) as ReadableStream<Uint8Array>;
  if (statusCode >= 200 && statusCode <= 599) return new Response(stream, { status: statusCode, headers: answered });
  // A Response refuses any other status (a broken server's 999), where fetch answers with it: made as a
  // failure's, the status is then the one that came, so the readers say what answered, not that nothing did.
  const response = new Response(stream, { status: 500, headers: answered });
  Object.defineProperty(response, 'status', { value: statusCode });
  return response;
}
