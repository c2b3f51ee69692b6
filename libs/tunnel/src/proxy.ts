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
  const headers: OutgoingHttpHeaders = {
    ...endToEndHeaders(req.headers),
    ...options.extraHeaders,
    ':method': req.method ?? 'GET',
    ':path': path,
    ':authority': req.headers.host ?? 'runtime',
  };
  if (allowsTrailers(req.headers)) headers.te = 'trailers';
  let stream: http2.ClientHttp2Stream;
  try {
    stream = tunnel.request(headers, { endStream: !hasBody(req) });
  } catch {
    // A tunnel that died between the check above and now is "not connected"; anything else is the stream's fault.
    return answer502(res, tunnel.closed ? 'runtime not connected' : 'runtime stream failed', runtimeId);
  }
  // The response's 'close' before 'finish' is the client going away: cancel upstream now.
  res.once('close', () => {
    if (!res.writableFinished && !stream.destroyed) stream.close(http2.constants.NGHTTP2_CANCEL);
  });
  if (hasBody(req)) {
    req.pipe(stream);
    req.once('error', () => stream.close(http2.constants.NGHTTP2_CANCEL));
  } else {
    req.resume();
  }
  stream.once('response', (upstream) => {
    const status = Number(upstream[':status']);
    const out: OutgoingHttpHeaders = {};
    for (const [name, value] of Object.entries(upstream)) {
      if (value !== undefined && isEndToEnd(name)) out[name] = value;
    }
    res.writeHead(status, out);
    let bodyStarted = false;
    stream.once('end', () => (bodyStarted = true));
    // Frames that arrive in one turn of the loop (an event and the end of the
    // stream, say) leave in one write to the client instead of one each;
    // registered before pipe's listener so the cork is in place for its write.
    let corked = false;
    const release = (): void => {
      corked = false;
      const socket = res.socket;
      if (!res.writableEnded && socket && !socket.destroyed && socket.writableCorked > 0) socket.uncork();
    };
    stream.on('data', () => {
      bodyStarted = true;
      if (corked) return;
      corked = true;
      // The socket, not `res`: a corked response buffers chunks apart and its
      // end() would then write the terminating chunk ahead of them.
      res.socket?.cork();
      setImmediate(release);
    });
    stream.pipe(res);
    // Headers normally leave with the first body chunk (one write); a stream that stays silent, like an
    // SSE stream before its first event, gets them flushed after this turn so the client is not kept waiting.
    setImmediate(() => {
      if (!bodyStarted && !res.destroyed && !res.writableEnded) res.flushHeaders();
    });
  });
  stream.once('trailers', (trailers) => {
    const out: Record<string, string> = {};
    for (const [name, value] of Object.entries(trailers))
      if (isEndToEnd(name) && value !== undefined) out[name] = String(value);
    res.addTrailers(out);
  });
  stream.once('error', () => fail(res, runtimeId));
  stream.once('close', () => {
    // A reset (RST_STREAM, session death) ends the stream without 'end'.
    if (stream.rstCode !== http2.constants.NGHTTP2_NO_ERROR || !stream.readableEnded) fail(res, runtimeId);
  });
}

function hasBody(req: IncomingMessage): boolean {
  return req.headers['transfer-encoding'] !== undefined || Number(req.headers['content-length'] ?? 0) > 0;
}

function fail(res: ServerResponse, runtimeId: string): void {
  if (res.writableEnded || res.destroyed) return;
  if (res.headersSent) res.destroy();
  else answer502(res, 'runtime stream failed', runtimeId);
}

function answer502(res: ServerResponse, error: string, runtimeId: string): void {
  const body = JSON.stringify({ error, runtime: runtimeId });
  res.writeHead(502, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
  res.end(body);
}
