import type { IncomingHttpHeaders } from 'node:http';
import http2 from 'node:http2';
import type { Dispatcher } from 'undici';

const { NGHTTP2_CANCEL } = http2.constants;

/** The one method of undici's Dispatcher that `exchange` uses. */
export type Dispatch = Pick<Dispatcher, 'dispatch'>;

/** One HTTP/2 connection to an origin and the streams open on it. */
interface Connection {
  readonly session: http2.ClientHttp2Session;
  /** `host:port`, shared by every stream's `:authority`. */
  readonly authority: string;
  open: number;
  /** False once the peer sent GOAWAY or the session failed: no new streams. */
  usable: boolean;
}

/** Where a stream's shared listeners (StreamRequest's) find its request. */
const REQUEST = Symbol('switchyard.eventStreamRequest');
type TaggedStream = http2.ClientHttp2Stream & { [REQUEST]?: StreamRequest };

/**
 * Requests (event streams: bodiless, answered for as long as the client
 * listens) as HTTP/2 streams with prior knowledge (h2c), many per connection,
 * behind undici's dispatch contract as far as `exchange` uses it. Not
 * undici's own HTTP/2 client: an open stream through it also holds undici's
 * request, its controller, its stream state and a header object in
 * dictionary mode, about 1 KB of heap per stream (docs/benchmarks.md);
 * here it holds one small object and the header array.
 *
 * Guarantees: connect failures carry the socket's error code (see
 * isConnectFailure), a peer that does not speak HTTP/2 fails the request
 * with `ERR_HTTP2_ERROR` (see EventStreamUpstream), a connection that sent
 * GOAWAY takes no new streams, one without streams closes after
 * `idleTimeoutMs`, and one carrying streams that leaves a PING unanswered
 * for `pingIntervalMs` is destroyed, failing its streams. An event stream
 * has no idle timeout (it may stay silent for hours), so without the ping a
 * scheduler that vanished without a reset (host down, network partition)
 * would hold its clients' streams open until TCP gave up, if ever; failed,
 * they end at the client, which opens them again (`Last-Event-ID`). No
 * retries: the exchange owns those.
 */
export class Http2EventStreams implements Dispatch {
  readonly #connections = new Map<string, Connection[]>();
  readonly #streamsPerConnection: number;
  readonly #connectTimeoutMs: number;
  readonly #idleTimeoutMs: number;
  readonly #pingIntervalMs: number;

  constructor(options: {
    streamsPerConnection: number;
    connectTimeoutMs: number;
    idleTimeoutMs: number;
    pingIntervalMs: number;
  }) {
    this.#streamsPerConnection = options.streamsPerConnection;
    this.#connectTimeoutMs = options.connectTimeoutMs;
    this.#idleTimeoutMs = options.idleTimeoutMs;
    this.#pingIntervalMs = options.pingIntervalMs;
  }

  dispatch(options: Dispatcher.DispatchOptions, handler: Dispatcher.DispatchHandler): boolean {
    const origin = String(options.origin);
    StreamRequest.start(() => this.#connectionFor(origin), options, handler);
    return true;
  }

  close(): Promise<void> {
    const sessions = [...this.#connections.values()].flat().map((c) => c.session);
    this.#connections.clear();
    return Promise.all(
      sessions.map(
        (s) => new Promise<void>((resolve) => (s.destroyed ? resolve() : (s.once('close', resolve), s.destroy()))),
      ),
    ).then(() => undefined);
  }

  #connectionFor(origin: string): Connection {
    let list = this.#connections.get(origin);
    if (!list) this.#connections.set(origin, (list = []));
    for (const c of list) if (c.usable && c.open < this.#capOf(c)) return c;
    const connection = this.#connect(origin);
    list.push(connection);
    return connection;
  }

  /**
   * Streams a connection may carry: ours, or fewer when the peer allows
   * fewer (a stream past its limit would wait in nghttp2 for a free slot,
   * which an event stream may never give back). Known from the peer's
   * SETTINGS on, so a burst before they arrive can still go over it.
   */
  #capOf(c: Connection): number {
    const peer = c.session.remoteSettings.maxConcurrentStreams;
    return peer === undefined ? this.#streamsPerConnection : Math.min(peer, this.#streamsPerConnection);
  }

  #connect(origin: string): Connection {
    const session = http2.connect(origin, {
      peerMaxConcurrentStreams: this.#streamsPerConnection,
      settings: { enablePush: false },
    });
    const connection: Connection = { session, authority: new URL(origin).host, open: 0, usable: true };
    const connectTimer = setTimeout(() => {
      // The code undici gives the same failure, so isConnectFailure reads both alike.
      const error = Object.assign(new Error(`connect to ${origin} timed out`), { code: 'UND_ERR_CONNECT_TIMEOUT' });
      session.destroy(error);
    }, this.#connectTimeoutMs);
    connectTimer.unref();
    session.once('connect', () => clearTimeout(connectTimer));
    const retire = (): void => {
      clearTimeout(connectTimer);
      if (!connection.usable) return;
      connection.usable = false;
      const list = this.#connections.get(origin);
      const at = list?.indexOf(connection) ?? -1;
      if (at >= 0) list!.splice(at, 1);
      if (list?.length === 0) this.#connections.delete(origin);
    };
    const pinger = this.#keepChecked(connection, origin);
    session.once('goaway', retire);
    session.once('close', () => (clearInterval(pinger), retire()));
    // The error also reaches every stream of the session, which reports it.
    session.on('error', retire);
    session.setTimeout(this.#idleTimeoutMs, () => {
      if (connection.open > 0) return;
      // Out of the pool first: a request must not pick a closing session.
      retire();
      session.close();
    });
    // Only open streams keep the process alive.
    session.unref();
    return connection;
  }

  /**
   * Every `pingIntervalMs` a connection with open streams sends a PING; one
   * still unanswered at the next round means the peer is gone. One timer
   * per connection, none per stream.
   */
  #keepChecked(connection: Connection, origin: string): NodeJS.Timeout {
    const { session } = connection;
    let outstanding = false;
    const pinger = setInterval(() => {
      if (session.destroyed) return;
      if (outstanding) {
        const error = new Error(`no answer to an HTTP/2 ping from ${origin} within ${this.#pingIntervalMs} ms`);
        return void session.destroy(Object.assign(error, { code: 'ERR_HTTP2_PING_TIMEOUT' }));
      }
      if (connection.open === 0 || session.connecting) return;
      outstanding = true;
      // An error here is the session closing, which its streams report.
      session.ping((error) => void (error || (outstanding = false)));
    }, this.#pingIntervalMs);
    pinger.unref();
    return pinger;
  }
}

/** One request on a connection, and the controller its handler drives. */
class StreamRequest implements Dispatcher.DispatchController {
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
    const headers = [':method', options.method, ':authority', c.authority, ':scheme', 'http', ':path', options.path];
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
      const timer = setTimeout(() => request.abort(new Error('upstream headers timeout')), options.headersTimeout);
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
