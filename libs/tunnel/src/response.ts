import http2 from 'node:http2';

/**
 * The runtime's http2 compat response. A body handed whole to `end()` before
 * any header went out leaves as one piece: HEADERS with a `Content-Length`
 * (as Node's HTTP/1.1 server declares it) and one DATA frame that carries
 * END_STREAM, in one tunnel message.
 *
 * Why: compat always asks for the trailers handshake, so END_STREAM would
 * follow the body a few event-loop turns later as a frame of its own — one
 * more tunnel message, wake-up and socket write on both ends of every
 * short answer. The length also lets the scheduler's proxy finish the
 * client's response at the last body byte.
 *
 * Not done (compat's own path): a response whose headers were already sent
 * (`writeHead`, `write`), one with trailers added before `end()`, and 1xx,
 * 204 and 304, where a length would be wrong.
 */
export class LengthDeclaringResponse extends http2.Http2ServerResponse {
  #trailers = false;

  // Trailers need the handshake (and chunked framing on the HTTP/1.1 side, where a length would drop them).
  override addTrailers(trailers: http2.OutgoingHttpHeaders): void {
    this.#trailers = true;
    super.addTrailers(trailers);
  }

  override end(
    chunk?: string | Uint8Array | (() => void),
    encoding?: BufferEncoding | (() => void),
    callback?: () => void,
  ): this {
    const stream = this.stream;
    if (
      !this.headersSent &&
      !this.#trailers &&
      (typeof chunk === 'string' || chunk instanceof Uint8Array) &&
      this.statusCode >= 200 &&
      this.statusCode !== 204 &&
      this.statusCode !== 304
    ) {
      if (!this.hasHeader('content-length')) {
        const length =
          typeof chunk === 'string'
            ? Buffer.byteLength(chunk, typeof encoding === 'string' ? encoding : 'utf8')
            : chunk.byteLength;
        this.setHeader('content-length', length);
      }
      // The headers compat would send, minus its trailers handshake: the
      // body's one DATA frame then carries END_STREAM (compat's end() writes
      // it and ends the stream in this turn). A HEAD answer is headers only,
      // which compat already sends with END_STREAM.
      if (this.req.method !== 'HEAD' && !stream.destroyed)
        stream.respond({ ...this.getHeaders(), ':status': this.statusCode });
    }
    // The base overloads are narrower than this one signature; the arguments pass through as given.
    return super.end(chunk as string, encoding as BufferEncoding, callback);
  }
}
