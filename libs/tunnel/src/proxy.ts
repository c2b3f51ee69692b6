import type { IncomingMessage, OutgoingHttpHeaders, ServerResponse } from 'node:http';
import http2 from 'node:http2';
import { PROXY_ERRORS, PROXY_ERROR_HEADER, SwitchyardError } from '@switchyard/protocol';
import { tunnelRequestHeaders } from './headers.ts';
import { relayResponse } from './relay.ts';
import type { Tunnel } from './tunnel.ts';

export interface ProxyOptions {
  /** Added to (and overriding) the forwarded request headers, e.g. identity headers. */
  readonly extraHeaders?: OutgoingHttpHeaders;
  /** Runtime id named in the refusal body when `tunnel` is undefined. */
  readonly runtimeId?: string;
  /** Set on the runtime's answer, replacing any header of the same name it sent (e.g. a security policy). */
  readonly responseHeaders?: OutgoingHttpHeaders;
  /** Names (lower case) of the runtime's answer headers not passed on (e.g. those acting on the proxy's origin). */
  readonly droppedResponseHeaders?: ReadonlySet<string>;
  /**
   * HTTP/2 requests only (`proxyStreamToTunnel`): how long a request body
   * may take to arrive whole. Default TUNNEL_DEFAULTS.streamRequestTimeoutMs.
   * (An HTTP/1.1 server has its own `requestTimeout`.)
   */
  readonly requestTimeoutMs?: number;
}

/**
 * Streams one HTTP/1.1 request into the runtime as an HTTP/2 stream and the
 * answer back. `path` is the upstream path including any query string.
 *
 * Guarantees: hop-by-hop headers are dropped (`Host` becomes `:authority`,
 * `TE` survives only as `trailers`), and from the answer one posing as
 * Switchyard's (`posesAsSwitchyard`); bodies flow both ways without buffering
 * beyond stream windows; response headers leave at the end of the event-loop
 * turn they arrive in, with whatever body came along, and each later chunk
 * (e.g. one SSE event) is written as it arrives; a reply with a declared
 * `Content-Length` is complete for the client at its last byte; a client
 * disconnect resets the stream with CANCEL. An upstream failure before any
 * byte of the answer left is a 502 (see `failureOf` for its words), after
 * that it destroys the client response. No tunnel → 502
 * `{"error":"runtime not connected","runtime":"<id>"}`; a tunnel at its
 * stream limit → 503 `runtime stream limit reached` (see `refusalOf`).
 * No retries, no timeout (layered idle timeouts belong to the servers).
 */
export function proxyToTunnel(
  tunnel: Tunnel | undefined,
  req: IncomingMessage,
  res: ServerResponse,
  path: string,
  options: ProxyOptions = {},
): void {
  const runtimeId = tunnel?.runtimeId ?? options.runtimeId ?? '';
  if (!tunnel || tunnel.closed) return answerRefusal(res, PROXY_ERRORS.notConnected, runtimeId);
  const method = req.method ?? 'GET';
  const headers = tunnelRequestHeaders(
    req.headers,
    { method, path, authority: req.headers.host ?? 'runtime' },
    options.extraHeaders,
  );
  const body = hasBody(req);
  const stream = openStream(tunnel, headers, !body);
  if (typeof stream === 'string') return answerRefusal(res, stream, runtimeId);
  // The response's 'close' before 'finish' is the client going away: cancel upstream now.
  res.once('close', () => {
    if (!res.writableFinished && !stream.destroyed) stream.close(http2.constants.NGHTTP2_CANCEL);
  });
  // A bodiless request needs no reading: the server discards what is left once the response is done.
  if (body) {
    forwardBody(req, stream);
    req.once('error', () => stream.close(http2.constants.NGHTTP2_CANCEL));
  }
  stream.once('response', (upstream) =>
    relayResponse(stream, res, upstream, method, options.responseHeaders, options.droppedResponseHeaders),
  );
  stream.once('error', () => fail(res, tunnel));
  stream.once('close', () => {
    // A reset (RST_STREAM, session death) ends the stream without 'end'.
    if (stream.rstCode !== http2.constants.NGHTTP2_NO_ERROR || !stream.readableEnded) fail(res, tunnel);
  });
}

/**
 * Streams the request body into the runtime, pausing the client while the
 * stream's window is full (as `pipe()` would). With a declared
 * `Content-Length` the chunk that completes the body ends the stream in the
 * same call, so END_STREAM rides on its DATA frame — for a short body in the
 * same tunnel message as the HEADERS. `pipe()` ends the stream a turn later,
 * as a frame and a tunnel message of its own, and the runtime, which waits
 * for the whole body, waited for that message too.
 */
function forwardBody(req: IncomingMessage, stream: http2.ClientHttp2Stream): void {
  // A stream that ends before the body does (the runtime answered without reading it all, or reset it) never
  // drains: the rest of the body is read and dropped, as Node's server does, so the client's connection
  // reaches its next request instead of hanging with the request paused. (After pipe()'s own 'close'
  // listener, which pauses the request as it unpipes.)
  const dropRest = (): void => {
    stream.once('close', () => {
      if (!req.readableEnded) req.resume();
    });
  };
  const declared = Number(req.headers['content-length']);
  if (req.headers['transfer-encoding'] !== undefined || !Number.isSafeInteger(declared)) {
    req.pipe(stream);
    return dropRest();
  }
  dropRest();
  let received = 0;
  const resume = (): void => void req.resume();
  req.on('data', (chunk: Buffer) => {
    // A reset stream fails the response (see proxyToTunnel); the rest of the body is dropped.
    if (stream.destroyed) return;
    received += chunk.length;
    // Node's parser delivers exactly the declared length.
    if (received >= declared) return void stream.end(chunk);
    if (!stream.write(chunk)) {
      req.pause();
      stream.once('drain', resume);
    }
  });
}

/**
 * Opens the tunnel stream, or says why not in the words of the refusal
 * body: a tunnel at its stream limit is full, one that died since it was
 * looked up is "not connected", anything else is the stream's fault.
 */
export function openStream(
  tunnel: Tunnel,
  headers: OutgoingHttpHeaders,
  endStream: boolean,
): http2.ClientHttp2Stream | string {
  try {
    return tunnel.request(headers, { endStream });
  } catch (error) {
    return openFailureOf(tunnel, error);
  }
}

/** Why `tunnel` did not open a stream (it threw `error`), in the words of the refusal body. */
export function openFailureOf(tunnel: Tunnel, error: unknown): string {
  const full = error instanceof SwitchyardError && error.code === 'capacity_exhausted';
  return full ? PROXY_ERRORS.streamsFull : failureOf(tunnel);
}

/**
 * The status and headers of a proxy refusal with `error` (PROXY_ERRORS):
 * 503 with `Retry-After` for a full tunnel, which frees up as streams end;
 * 502 otherwise. Every refusal names its error in PROXY_ERROR_HEADER.
 */
export function refusalOf(error: string): { status: 502 | 503; headers: Record<string, string> } {
  const full = error === PROXY_ERRORS.streamsFull;
  return {
    status: full ? 503 : 502,
    headers: { [PROXY_ERROR_HEADER]: error, ...(full ? { 'retry-after': '1' } : {}) },
  };
}

/**
 * Why a stream of `tunnel` failed, in the words of the 502 body. A stream
 * that went down with its tunnel is "not connected": the runtime is gone,
 * and so is whatever it held for the request (a caller may start over
 * elsewhere). Otherwise the runtime, still there, reset this one stream.
 */
export function failureOf(tunnel: Tunnel): string {
  return tunnel.usable ? PROXY_ERRORS.streamFailed : PROXY_ERRORS.notConnected;
}

function hasBody(req: IncomingMessage): boolean {
  return req.headers['transfer-encoding'] !== undefined || Number(req.headers['content-length'] ?? 0) > 0;
}

function fail(res: ServerResponse, tunnel: Tunnel): void {
  if (res.writableEnded || res.destroyed) return;
  if (!res.headersSent) return answerRefusal(res, failureOf(tunnel), tunnel.runtimeId);
  // This turn's chunks may still be corked: the client gets what the runtime sent, then the abort.
  const socket = res.socket;
  while (socket && !socket.destroyed && socket.writableCorked > 0) socket.uncork();
  res.destroy();
}

function answerRefusal(res: ServerResponse, error: string, runtimeId: string): void {
  const body = JSON.stringify({ error, runtime: runtimeId });
  const { status, headers } = refusalOf(error);
  res.writeHead(status, { ...headers, 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
  res.end(body);
}
