import http2 from 'node:http2';
import { PROXY_ERRORS } from '@switchyard/protocol';
import { TUNNEL_DEFAULTS } from './defaults.ts';
import { answerHeaders, endToEndHeaders, tunnelRequestHeaders } from './headers.ts';
import { failureOf, openStream, refusalOf, type ProxyOptions } from './proxy.ts';
import type { Tunnel } from './tunnel.ts';

const { NGHTTP2_CANCEL, NGHTTP2_INTERNAL_ERROR, NGHTTP2_NO_ERROR } = http2.constants;

/**
 * `proxyToTunnel` for a request that arrived as an HTTP/2 stream (a gateway
 * speaking h2c to the scheduler): the stream is relayed into the runtime as
 * a stream of the tunnel, and the answer back, stream to stream.
 *
 * Guarantees: hop-by-hop headers are dropped both ways, and from the answer
 * one posing as Switchyard's (`posesAsSwitchyard`); bodies flow with
 * HTTP/2 flow control on both sides (`pipe`); the runtime's trailers pass
 * (every answer ends with a trailers frame, empty or not); a reset or close
 * of either stream resets the other (CANCEL towards the runtime,
 * INTERNAL_ERROR towards the client). An upstream failure before the
 * answer's headers is a 502 with `{"error","runtime"}`, as is a missing
 * tunnel; a tunnel at its stream limit is a 503 (see `refusalOf`). A
 * request body still arriving at `options.requestTimeoutMs` resets both
 * streams (CANCEL): nothing else bounds an HTTP/2 stream here, and one
 * trickling its body would hold a stream of the tunnel for ever.
 */
export function proxyStreamToTunnel(
  tunnel: Tunnel | undefined,
  inbound: http2.ServerHttp2Stream,
  inboundHeaders: http2.IncomingHttpHeaders,
  path: string,
  options: ProxyOptions = {},
): void {
  const runtimeId = tunnel?.runtimeId ?? options.runtimeId ?? '';
  inbound.on('error', () => {});
  if (!tunnel || tunnel.closed) return answerRefusal(inbound, PROXY_ERRORS.notConnected, runtimeId);
  const headers = tunnelRequestHeaders(
    inboundHeaders,
    { method: inboundHeaders[':method'] ?? 'GET', path, authority: inboundHeaders[':authority'] ?? 'runtime' },
    options.extraHeaders,
  );
  const upstream = openStream(tunnel, headers, inbound.endAfterHeaders);
  if (typeof upstream === 'string') return answerRefusal(inbound, upstream, runtimeId);
  upstream.on('error', () => {});
  if (!inbound.endAfterHeaders) {
    inbound.pipe(upstream);
    const timer = setTimeout(
      () => inbound.close(NGHTTP2_CANCEL),
      options.requestTimeoutMs ?? TUNNEL_DEFAULTS.streamRequestTimeoutMs,
    );
    timer.unref();
    const stop = (): void => clearTimeout(timer);
    inbound.once('end', stop);
    inbound.once('close', stop);
  }
  inbound.once('close', () => {
    if (!upstream.destroyed) upstream.close(NGHTTP2_CANCEL);
  });
  // The answer always ends through the trailers handshake, so END_STREAM is
  // only ever sent on purpose: Node's close() ends a stream's writable side
  // before its RST_STREAM, and a client would take a reset answer for a
  // complete one.
  let broken = false;
  upstream.once('response', (answer: http2.IncomingHttpHeaders & http2.IncomingHttpStatusHeader) => {
    if (inbound.destroyed) return;
    let received: http2.OutgoingHttpHeaders = {};
    upstream.once('trailers', (fields: http2.IncomingHttpHeaders) => (received = endToEndHeaders(fields)));
    inbound.once('wantTrailers', () => {
      if (!broken) inbound.sendTrailers(received);
    });
    const out = { ...answerHeaders(answer), ':status': answer[':status'] ?? 502 };
    inbound.respond(out, { endStream: upstream.endAfterHeaders, waitForTrailers: !upstream.endAfterHeaders });
    if (upstream.endAfterHeaders) return;
    // Not pipe()'s end: an answer cut by a reset must not end cleanly for the client.
    upstream.pipe(inbound, { end: false });
    upstream.once('end', () => {
      if (!upstream.rstCode) inbound.end();
    });
  });
  upstream.once('close', () => {
    // A reset (RST_STREAM, tunnel death) ends the stream without 'end'.
    if (upstream.rstCode === NGHTTP2_NO_ERROR && upstream.readableEnded) return;
    if (inbound.destroyed || inbound.closed) return;
    if (!inbound.headersSent) return answerRefusal(inbound, failureOf(tunnel), runtimeId);
    broken = true;
    inbound.close(NGHTTP2_INTERNAL_ERROR);
  });
}

function answerRefusal(stream: http2.ServerHttp2Stream, error: string, runtimeId: string): void {
  if (stream.destroyed || stream.headersSent) return;
  const body = JSON.stringify({ error, runtime: runtimeId });
  const { status, headers } = refusalOf(error);
  stream.respond({
    ...headers,
    ':status': status,
    'content-type': 'application/json',
    'content-length': Buffer.byteLength(body),
  });
  stream.end(body);
}
