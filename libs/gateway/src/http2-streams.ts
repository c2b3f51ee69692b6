import http2 from 'node:http2';
import { Heartbeat, systemClock } from '@switchyard/clock';
import { HTTP2_HEADER_FIELDS_MAX } from '@switchyard/protocol';
import { errors, type Dispatcher } from 'undici';
import { StreamRequest, type Connection } from './http2-stream-request.ts';

/** The one method of undici's Dispatcher that `exchange` uses. */
export type Dispatch = Pick<Dispatcher, 'dispatch'>;

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
 * GOAWAY, or is destroyed or closing, takes no new streams, one without
 * streams closes after `idleTimeoutMs`, and one carrying streams that leaves
 * a PING unanswered for `pingIntervalMs` is destroyed, failing its streams.
 * An event stream has no idle timeout (it may stay silent for hours), so
 * without the ping a scheduler that vanished without a reset (host down,
 * network partition) would hold its clients' streams open until TCP gave
 * up, if ever; failed, they end at the client, which opens them again
 * (`Last-Event-ID`). No retries: the exchange owns those.
 */
export class Http2EventStreams implements Dispatch {
  readonly #connections = new Map<string, Connection[]>();
  readonly #streamsPerConnection: number;
  readonly #connectTimeoutMs: number;
  readonly #idleTimeoutMs: number;
  readonly #pingIntervalMs: number;
  #closed = false;

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

  /** Once closed, throws (as undici's closed clients do) instead of opening a session nothing would close. */
  dispatch(options: Dispatcher.DispatchOptions, handler: Dispatcher.DispatchHandler): boolean {
    // A request still being routed when the gateway closed would otherwise hold a stream past close().
    if (this.#closed) throw new errors.ClientClosedError();
    const origin = String(options.origin);
    StreamRequest.start(() => this.#connectionFor(origin), options, handler);
    return true;
  }

  close(): Promise<void> {
    this.#closed = true;
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
    for (const c of list) if (Http2EventStreams.#takesStreams(c) && c.open < this.#capOf(c)) return c;
    const connection = this.#connect(origin);
    list.push(connection);
    return connection;
  }

  /**
   * A session destroyed (a ping or connect timeout, its socket gone) or
   * closing stays in the pool until its 'close' event, a tick or more
   * later; a request put on it then would fail without being sent.
   */
  static #takesStreams(c: Connection): boolean {
    return c.usable && !c.session.destroyed && !c.session.closed;
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
      maxHeaderListPairs: HTTP2_HEADER_FIELDS_MAX,
      settings: { enablePush: false },
    });
    const { host, protocol } = new URL(origin);
    const connection: Connection = { session, authority: host, scheme: protocol.slice(0, -1), open: 0, usable: true };
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
    const heartbeat = this.#keepChecked(connection, origin);
    session.once('goaway', retire);
    session.once('close', () => (heartbeat.stop(), retire()));
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
   * unanswered for as long again means the peer is gone, and the session is
   * destroyed, failing its streams. One heartbeat per connection, none per
   * stream; it judges on what has been read, so a gateway that stood still
   * does not blame the scheduler for its own pause (see Heartbeat). On the
   * system clock: a stream's liveness is real time whatever clock the
   * gateway's state machines run on.
   */
  #keepChecked(connection: Connection, origin: string): Heartbeat {
    const { session } = connection;
    const intervalMs = this.#pingIntervalMs;
    return new Heartbeat({
      clock: systemClock,
      intervalMs,
      timeoutMs: intervalMs,
      // A connection without streams is not pinged: its idle timeout ends it.
      probe: () => (connection.open === 0 || session.connecting ? Promise.resolve(0) : ping(session)),
      onRtt: () => {},
      // A ping that failed (most often the session already going) ends the connection as an unanswered one does.
      onDead: (reason, cause) => {
        if (session.destroyed) return;
        const message =
          cause === 'unanswered'
            ? `no answer to an HTTP/2 ping from ${origin} within ${intervalMs} ms`
            : `HTTP/2 ping to ${origin}: ${reason}`;
        session.destroy(Object.assign(new Error(message), { code: 'ERR_HTTP2_PING_TIMEOUT' }));
      },
    });
  }
}

/** One HTTP/2 PING: resolves with its round trip in ms, rejects when the session cannot send or answer it. */
function ping(session: http2.ClientHttp2Session): Promise<number> {
  return new Promise((resolve, reject) => {
    try {
      if (!session.ping((error, durationMs) => (error ? reject(error) : resolve(durationMs)))) {
        reject(new Error('too many outstanding pings'));
      }
    } catch (error) {
      reject(error instanceof Error ? error : new Error(String(error)));
    }
  });
}
