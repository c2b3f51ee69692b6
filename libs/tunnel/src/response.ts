import http2 from 'node:http2';

/**
 * The runtime's http2 compat response. A body handed whole to `end()` before
 * any header went out gets a `Content-Length`, as Node's HTTP/1.1 server
 * gives it. Through the tunnel this lets the scheduler's proxy finish the
 * client's response with the last body byte, without waiting for END_STREAM:
 * compat sends that frame only after its trailers handshake, a few
 * event-loop turns after the body.
 *
 * Not done: for a response whose headers were already sent (`writeHead`,
 * `write`), one with trailers added before `end()`, or for 1xx, 204 and 304,
 * where a length would be wrong.
 */
export class LengthDeclaringResponse extends http2.Http2ServerResponse {
  #trailers = false;

  // Trailers need chunked framing on the HTTP/1.1 side, where a length would drop them.
  override addTrailers(trailers: http2.OutgoingHttpHeaders): void {
    this.#trailers = true;
    super.addTrailers(trailers);
  }

  override end(
    chunk?: string | Uint8Array | (() => void),
    encoding?: BufferEncoding | (() => void),
    callback?: () => void,
  ): this {
    if (
      !this.headersSent &&
      !this.#trailers &&
      (typeof chunk === 'string' || chunk instanceof Uint8Array) &&
      !this.hasHeader('content-length') &&
      this.statusCode >= 200 &&
      this.statusCode !== 204 &&
      this.statusCode !== 304
    ) {
      const length =
        typeof chunk === 'string'
          ? Buffer.byteLength(chunk, typeof encoding === 'string' ? encoding : 'utf8')
          : chunk.byteLength;
      this.setHeader('content-length', length);
    }
    // The base overloads are narrower than this one signature; the arguments pass through as given.
    return super.end(chunk as string, encoding as BufferEncoding, callback);
  }
}
