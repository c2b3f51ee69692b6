import type { IncomingMessage, OutgoingHttpHeaders, ServerResponse } from 'node:http';
import http2 from 'node:http2';
import { allowsTrailers, endToEndHeaders, isEndToEnd } from './headers.ts';
import type { Tunnel } from './tunnel.ts';

export interface ProxyOptions {
  /** Added to (and overriding) the forwarded request headers, e.g. identity headers. */
  readonly extraHeaders?: OutgoingHttpHeaders;
  /** Runtime id named in the 502 body when `tunnel` is undefined. */
  readonly runtimeId?: string;
}

/**
 * Streams one HTTP/1.1 request into the runtime as an HTTP/2 stream and the
 * answer back. `path` is the upstream path including any query string.
 *
 * Guarantees: hop-by-hop headers are dropped (`Host` becomes `:authority`,
 * `TE` survives only as `trailers`); bodies flow both ways without buffering
 * beyond stream windows; response headers are flushed at once and each chunk
 * (e.g. one SSE event) is written as it arrives; a client disconnect resets
 * the stream with CANCEL; an upstream failure after headers destroys the
 * client response, before headers it is a 502. No tunnel → 502
 * `{"error":"runtime not connected","runtime":"<id>"}`. No retries, no timeout
 * (layered idle timeouts belong to the servers).
 */
export function proxyToTunnel(
  tunnel: Tunnel | undefined,
  req: IncomingMessage,
  res: ServerResponse,
  path: string,
  options: ProxyOptions = {},
): void {
  const runtimeId = tunnel?.runtimeId ?? options.runtimeId ?? '';
  if (!tunnel || tunnel.closed) return answer502(res, 'runtime not connected', runtimeId);
  const headers = endToEndHeaders(req.headers);
  if (options.extraHeaders) Object.assign(headers, options.extraHeaders);
  headers[':method'] = req.method ?? 'GET';
  headers[':path'] = path;
  headers[':authority'] = req.headers.host ?? 'runtime';
  if (allowsTrailers(req.headers)) headers.te = 'trailers';
  const body = hasBody(req);
  let stream: http2.ClientHttp2Stream;
  try {
    stream = tunnel.request(headers, { endStream: !body });
  } catch {
    // A tunnel that died between the check above and now is "not connected"; anything else is the stream's fault.
    return answer502(res, tunnel.closed ? 'runtime not connected' : 'runtime stream failed', runtimeId);
  }
  // The response's 'close' before 'finish' is the client going away: cancel upstream now.
  res.once('close', () => {
    if (!res.writableFinished && !stream.destroyed) stream.close(http2.constants.NGHTTP2_CANCEL);
  });
  // A bodiless request needs no reading: the server discards what is left once the response is done.
  if (body) {
    req.pipe(stream);
    req.once('error', () => stream.close(http2.constants.NGHTTP2_CANCEL));
  }
  stream.once('response', (upstream) => relayResponse(stream, res, upstream));
  stream.once('trailers', (trailers) => {
    const out: Record<string, string> = {};
    for (const name in trailers) {
      const value = trailers[name];
      if (value !== undefined && isEndToEnd(name)) out[name] = String(value);
    }
    res.addTrailers(out);
  });
  stream.once('error', () => fail(res, runtimeId));
  stream.once('close', () => {
    // A reset (RST_STREAM, session death) ends the stream without 'end'.
    if (stream.rstCode !== http2.constants.NGHTTP2_NO_ERROR || !stream.readableEnded) fail(res, runtimeId);
  });
}

/**
 * Copies the upstream answer to the client. Everything that arrives in one
 * turn of the event loop (headers, an event, the end of the stream) leaves in
 * one socket write; headers of a stream that stays silent, like an SSE stream
 * before its first event, are flushed at the end of the turn so the client is
 * not kept waiting. Hand-rolled rather than `pipe()`: the same pause-on-full
 * backpressure without pipe's per-request listener set-up and teardown.
 */
function relayResponse(
  stream: http2.ClientHttp2Stream,
  res: ServerResponse,
  upstream: http2.IncomingHttpHeaders & http2.IncomingHttpStatusHeader,
): void {
  const out: OutgoingHttpHeaders = {};
  for (const name in upstream) {
    const value = upstream[name];
    if (value !== undefined && isEndToEnd(name)) out[name] = value;
  }
  res.writeHead(Number(upstream[':status']), out);
  let bodyStarted = false;
  let corked = false;
  const release = (): void => {
    corked = false;
    if (res.writableEnded || res.destroyed) return;
    if (!bodyStarted) res.flushHeaders();
    const socket = res.socket;
    if (socket && !socket.destroyed && socket.writableCorked > 0) socket.uncork();
  };
  // The socket, not `res`: a corked response buffers chunks apart and its
  // end() would then write the terminating chunk ahead of them. end() uncorks
  // the socket fully, so a stream that ends within the turn leaves at once.
  const cork = (): void => {
    if (corked) return;
    corked = true;
    res.socket?.cork();
    setImmediate(release);
  };
  cork();
  const resume = (): void => void stream.resume();
  stream.on('data', (chunk: Buffer) => {
    bodyStarted = true;
    cork();
    if (!res.write(chunk) && !res.destroyed) {
      stream.pause();
      res.once('drain', resume);
    }
  });
  stream.once('end', () => {
    bodyStarted = true;
    res.end();
  });
}

function hasBody(req: IncomingMessage): boolean {
  return req.headers['transfer-encoding'] !== undefined || Number(req.headers['content-length'] ?? 0) > 0;
}

function fail(res: ServerResponse, runtimeId: string): void {
  if (res.writableEnded || res.destroyed) return;
  if (!res.headersSent) return answer502(res, 'runtime stream failed', runtimeId);
  // A reset can arrive in the same turn as the headers and first chunks, still corked: the client gets
  // what the runtime sent, then the abort, rather than a connection reset without a status.
  const socket = res.socket;
  if (socket && !socket.destroyed && socket.writableCorked > 0) {
    res.flushHeaders();
    while (socket.writableCorked > 0) socket.uncork();
  }
  res.destroy();
}

function answer502(res: ServerResponse, error: string, runtimeId: string): void {
  const body = JSON.stringify({ error, runtime: runtimeId });
  res.writeHead(502, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
  res.end(body);
}
