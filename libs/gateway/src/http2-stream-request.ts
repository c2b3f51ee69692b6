import type { IncomingHttpHeaders } from 'node:http';
import http2 from 'node:http2';
import type { Dispatcher } from 'undici';

const { NGHTTP2_CANCEL } = http2.constants;

/** One HTTP/2 connection to an origin and the streams open on it. */
export interface Connection {
  readonly session: http2.ClientHttp2Session;
  /** `host:port`, shared by every stream's `:authority`. */
  readonly authority: string;
  /** `http` (h2c) or `https` (ALPN h2), every stream's `:scheme`: the origin's, as RFC 9113 §8.3.1 asks. */
  readonly scheme: string;
  open: number;
  /** False once the peer sent GOAWAY or the session failed: no new streams. */
  usable: boolean;
}

/** Where a stream's shared listeners (StreamRequest's) find its request. */
const REQUEST = Symbol('switchyard.eventStreamRequest');
type TaggedStream = http2.ClientHttp2Stream & { [REQUEST]?: StreamRequest };

/** One request on a connection, and the controller its handler drives. */
export class StreamRequest implements Dispatcher.DispatchController {
  rawHeaders: IncomingHttpHeaders | null = null;
  readonly #handler: Dispatcher.DispatchHandler;
  #connection: Connection | undefined;
  #stream: TaggedStream | undefined;
  #headersTimer: NodeJS.Timeout | undefined;
  #reason: Error | null = null;
  #paused = false;
  #done = false;

  private constructor(handler: Dispatcher.DispatchHandler) {
    this.#handler = handler;
  }

  /** Starts the request on the connection `connection()` picks, unless the handler aborts it first. */
  static start(
    connection: () => Connection,
    options: Dispatcher.DispatchOptions,
    handler: Dispatcher.DispatchHandler,
  ): void {
    const request = new StreamRequest(handler);
    handler.onRequestStart?.(request, {});
    // Aborted while starting (the client left first): nothing is sent.
    if (request.#done) return;
    const c = connection();
    const headers = [':method', options.method, ':authority', c.authority, ':scheme', c.scheme, ':path', options.path];
    for (const [name, value] of Object.entries((options.headers ?? {}) as Record<string, string>)) {
      headers.push(name, value);
    }
    let stream: TaggedStream;
    try {
      stream = c.session.request(headers, { endStream: true });
    } catch (error) {
      return request.#fail(error as Error);
    }
    request.#connection = c;
    request.#stream = stream;
    stream[REQUEST] = request;
    if (c.open++ === 0) c.session.ref();
    const on = StreamRequest.#listeners;
    stream.on('response', on.response);
    stream.on('data', on.data);
    stream.on('end', on.end);
    stream.on('error', on.error);
    stream.on('close', on.close);
    if (options.headersTimeout) {
      const timeout = Object.assign(new Error('upstream headers timeout'), { code: 'UND_ERR_HEADERS_TIMEOUT' });
      const timer = setTimeout(() => request.abort(timeout), options.headersTimeout);
      timer.unref();
      request.#headersTimer = timer;
    }
  }

  get aborted(): boolean {
    return this.#reason !== null;
  }

  get paused(): boolean {
    return this.#paused;
  }

  get reason(): Error | null {
    return this.#reason;
  }

  abort(reason: Error): void {
    if (this.#done) return;
    this.#reason = reason;
    const stream = this.#stream;
    if (stream && !stream.destroyed) stream.close(NGHTTP2_CANCEL);
    this.#fail(reason);
  }

  pause(): void {
    this.#paused = true;
    this.#stream?.pause();
  }

  resume(): void {
    this.#paused = false;
    this.#stream?.resume();
  }

  #responded(headers: http2.IncomingHttpHeaders & http2.IncomingHttpStatusHeader): void {
    this.#clearHeadersTimer();
    const fields: IncomingHttpHeaders = {};
    for (const name in headers) if (name[0] !== ':') fields[name] = headers[name];
    this.#handler.onResponseStart?.(this, Number(headers[':status']), fields);
  }

  #received(chunk: Buffer): void {
    if (!this.#done) this.#handler.onResponseData?.(this, chunk);
  }

  #ended(): void {
    if (this.#done) return;
    this.#done = true;
    this.#clearHeadersTimer();
    this.#handler.onResponseEnd?.(this, {});
  }

  /** After its end, an error or a reset: a stream closed without its end fails the request. */
  #closed(rstCode: number | undefined): void {
    const c = this.#connection!;
    if (--c.open === 0) c.session.unref();
    if (!this.#done) this.#fail(new Error(`upstream stream closed (code ${rstCode})`));
  }

  #fail(error: Error): void {
    if (this.#done) return;
    this.#done = true;
    this.#clearHeadersTimer();
    this.#handler.onResponseError?.(this, error);
  }

  #clearHeadersTimer(): void {
    clearTimeout(this.#headersTimer);
    this.#headersTimer = undefined;
  }

  /**
   * The listeners of every stream, shared (`this` is the stream), and added
   * with `on`, not `once` (which wraps each in a closure): an open stream
   * holds no function of its own. Each event comes once, and a request
   * ignores whatever follows its end.
   */
  static readonly #listeners = {
    response(this: TaggedStream, headers: http2.IncomingHttpHeaders & http2.IncomingHttpStatusHeader): void {
      const request = this[REQUEST];
      if (request) request.#responded(headers);
    },
    data(this: TaggedStream, chunk: Buffer): void {
      const request = this[REQUEST];
      if (request) request.#received(chunk);
    },
    end(this: TaggedStream): void {
      const request = this[REQUEST];
      if (request) request.#ended();
    },
    error(this: TaggedStream, error: Error): void {
      const request = this[REQUEST];
      if (request) request.#fail(error);
    },
    close(this: TaggedStream): void {
      const request = this[REQUEST];
      this[REQUEST] = undefined;
      if (request) request.#closed(this.rstCode);
    },
  };
}
