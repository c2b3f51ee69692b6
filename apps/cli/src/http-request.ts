import { anyPortFetch } from '@switchyard/service';

/** What the commands send: a subset of fetch's RequestInit. */
export interface HttpInit {
  readonly method?: string;
  readonly headers?: HeadersInit;
  readonly body?: string;
  readonly signal?: AbortSignal;
}

/**
 * One HTTP exchange, answered as fetch() answers it (a web Response), made
 * with anyPortFetch: fetch refuses the ports browsers block (6000,
 * 6665-6669, 10080, …) before it dials, with only "bad port" to say, and a
 * scheduler or gateway served on one is a legitimate deployment. Unlike
 * fetch, a redirect is answered, not followed (neither app sends one), and a
 * failure is the connection's or TLS handshake's own error, whose code the
 * messages read (a refused connection, a certificate not trusted), not a
 * "fetch failed" wrapping it. `signal` bounds the body as well as the headers.
 */
export async function httpRequest(url: string | URL, init: HttpInit = {}): Promise<Response> {
  try {
    return await anyPortFetch(url, { ...init, redirect: 'manual' });
  } catch (error) {
    // anyPortFetch's failure to exchange at all; anything else (an aborted signal's reason) is thrown as it is.
    if (error instanceof TypeError && error.message === 'fetch failed' && error.cause !== undefined) throw error.cause;
    throw error;
  }
}
