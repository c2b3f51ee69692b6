import type { Server } from 'node:http';
import type { Server as HttpsServer } from 'node:https';
import http2 from 'node:http2';
import type { Socket } from 'node:net';
import { FORWARDED_HEADER_BYTES_MAX, HTTP2_HEADER_FIELDS_MAX } from '@switchyard/protocol';

/** What every HTTP/2 connection with prior knowledge opens with (RFC 9113 §3.4). */
const PREFACE = Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n', 'latin1');

/** A connection that has not said which protocol it speaks within this time of its accept is dropped. */
const SNIFF_TIMEOUT_MS = 10_000;

/**
 * How long an HTTP/2 connection without a stream is kept by default: longer
 * than a gateway keeps one (60 s), so the gateway closes first.
 */
const H2C_IDLE_TIMEOUT_MS = 120_000;

/** Where a stream finds its connection's count of open streams (a stream's `session` is gone at its 'close'). */
const USE = Symbol('switchyard.h2cUse');
interface SessionUse {
  readonly session: http2.ServerHttp2Session;
  open: number;
  idle: NodeJS.Timeout | undefined;
}
type TaggedStream = http2.ServerHttp2Stream & { [USE]?: SessionUse };

export interface H2cOptions {
  /** Called for every HTTP/2 stream; the handler answers or resets it. */
  readonly onStream: (stream: http2.ServerHttp2Stream, headers: http2.IncomingHttpHeaders) => void;
  /** Concurrent streams per connection the server advertises. */
  readonly maxConcurrentStreams: number;
  /**
   * An HTTP/2 connection without an open stream for this long is closed
   * (GOAWAY): one opened and abandoned, or whose peer vanished, would
   * otherwise be held for ever (HTTP/1.1 ones have the server's keep-alive
   * timeout). A stream open, however silent, keeps it. Default
   * H2C_IDLE_TIMEOUT_MS.
   */
  readonly idleTimeoutMs?: number;
  /**
   * A connection that has not said which protocol it speaks this long after
   * it was accepted is dropped: a deadline, not an idle timeout, so a peer
   * trickling the HTTP/2 preface cannot stretch it. Default SNIFF_TIMEOUT_MS.
   */
  readonly sniffTimeoutMs?: number;
  /**
   * Called for every HTTP/2 connection once it is set up, e.g. to check its
   * peer's liveness: an error it destroys the session with stays there (and
   * reaches the session's streams), it does not reach the process.
   */
  readonly onSession?: (session: http2.ServerHttp2Session) => void;
}

export interface H2cListener {
  /** HTTP/2 connections open now. */
  readonly sessions: number;
  /**
   * Drops connections that have not sent their first bytes yet, sends GOAWAY
   * to every HTTP/2 connection and cuts those still open after `timeoutMs`.
   * Idempotent.
   */
  close(timeoutMs: number): Promise<void>;
}

/**
 * Lets an HTTP/1.1 `server` also serve HTTP/2 with prior knowledge (h2c,
 * RFC 9113 §3.3) on its port: a connection that opens with the HTTP/2
 * preface goes to an HTTP/2 server, any other to `server` exactly as before
 * (requests, keep-alive, WebSocket upgrades, its timeouts and close).
 *
 * Why: a gateway holds thousands of long-lived event streams to a
 * scheduler; as HTTP/2 streams they share a few connections instead of
 * taking a socket (and a descriptor on each end) apiece.
 *
 * Not covered: `Upgrade: h2c` from HTTP/1.1 (clients that want HTTP/2 here
 * know it beforehand). HTTP/2 connections are not the HTTP/1.1 server's:
 * `closeServer` leaves them to `close()`.
 */
export function serveH2c(server: Server | HttpsServer, options: H2cOptions): H2cListener {
  const h2 = http2.createServer({
    // Node's default header list bound (65,535 bytes) is a byte short of what the gateway may forward.
    settings: {
      maxConcurrentStreams: options.maxConcurrentStreams,
      maxHeaderListSize: FORWARDED_HEADER_BYTES_MAX,
      enablePush: false,
    },
    // Node's default (10 MB) counts every open stream's state and trips ENHANCE_YOUR_CALM well before the stream limit.
    maxSessionMemory: 256,
    maxHeaderListPairs: HTTP2_HEADER_FIELDS_MAX,
    // nghttp2 closes a connection whose peer resets past 1,000 streams at once or 33 a second (its "rapid
    // reset" guard); a gateway resets one for every client that leaves, and clients leave together. Twice
    // the stream limit at once and a quarter of it a second let a gateway's clients all go without taking
    // every other client's streams down with the connection.
    streamResetBurst: Math.max(1000, 2 * options.maxConcurrentStreams),
    streamResetRate: Math.max(33, Math.ceil(options.maxConcurrentStreams / 4)),
  });
  const sessions = new Set<http2.ServerHttp2Session>();
  const idleTimeoutMs = options.idleTimeoutMs ?? H2C_IDLE_TIMEOUT_MS;
  const idleFrom = (use: SessionUse): void => {
    use.idle = setTimeout(() => use.session.close(), idleTimeoutMs);
    use.idle.unref();
  };
  const uses = new WeakMap<http2.ServerHttp2Session, SessionUse>();
  h2.on('session', (session) => {
    sessions.add(session);
    const use: SessionUse = { session, open: 0, idle: undefined };
    uses.set(session, use);
    idleFrom(use);
    session.once('close', () => {
      sessions.delete(session);
      clearTimeout(use.idle);
    });
    // A peer's protocol error ends its own session; it must not reach the process.
    session.on('error', () => {});
    options.onSession?.(session);
  });
  h2.on('stream', (stream: TaggedStream, headers) => {
    const use = uses.get(stream.session as http2.ServerHttp2Session);
    if (use) {
      stream[USE] = use;
      if (use.open++ === 0) clearTimeout(use.idle);
      // Shared, with `on`: an open stream (an idle event stream, for hours) holds no closure of its own.
      stream.on('close', streamClosed);
    }
    options.onStream(stream, headers);
  });

  // An HTTPS server hands its HTTP/1.1 handling the decrypted connection, once the handshake is done.
  const event = 'addContext' in server ? 'secureConnection' : 'connection';
  // The HTTP/1.1 server's own connection handling, called for every connection that is not HTTP/2.
  const http1 = server.listeners(event) as Array<(socket: Socket) => void>;
  // Connections that have not said yet which protocol they speak: neither server knows them.
  const undecided = new Set<Socket>();
  const sniffTimeoutMs = options.sniffTimeoutMs ?? SNIFF_TIMEOUT_MS;
  server.removeAllListeners(event);
  server.on(event, (socket: Socket) => {
    let seen: Buffer = Buffer.alloc(0);
    undecided.add(socket);
    // Not socket.setTimeout, which every byte restarts: one preface byte every few seconds held a
    // connection for minutes (24 bytes at 9 s each, then the HTTP/2 idle timeout).
    const sniffDeadline = setTimeout(() => socket.destroy(), sniffTimeoutMs);
    sniffDeadline.unref();
    socket.once('close', () => {
      clearTimeout(sniffDeadline);
      undecided.delete(socket);
    });
    const route = (toHttp2: boolean): void => {
      undecided.delete(socket);
      clearTimeout(sniffDeadline);
      socket.off('data', onData);
      socket.off('error', onError);
      socket.off('end', onError);
      socket.setTimeout(0);
      socket.pause();
      socket.unshift(seen);
      // HTTP/2 reads what is buffered once its session is set up; HTTP/1.1 reads by 'data' events, so it flows again.
      if (toHttp2) return void h2.emit('connection', socket);
      for (const listener of http1) listener.call(server, socket);
      socket.resume();
    };
    const onData = (chunk: Buffer): void => {
      seen = seen.length === 0 ? chunk : Buffer.concat([seen, chunk]);
      const n = Math.min(seen.length, PREFACE.length);
      const http2Prefix = seen.subarray(0, n).equals(PREFACE.subarray(0, n));
      if (http2Prefix && n < PREFACE.length) return;
      route(http2Prefix);
    };
    // Closed by its peer before saying anything (a scan, a health check of the port): nothing is left to read,
    // and the HTTP/1.1 server's half-open handling never saw it, so it would stay until the sniff deadline.
    const onError = (): void => void socket.destroy();
    socket.on('data', onData);
    socket.on('error', onError);
    socket.on('end', onError);
  });

  let closing: Promise<void> | undefined;
  function streamClosed(this: TaggedStream): void {
    const use = this[USE];
    this[USE] = undefined;
    if (use && --use.open === 0 && !use.session.closed && !use.session.destroyed) idleFrom(use);
  }
  return {
    get sessions() {
      return sessions.size;
    },
    close(timeoutMs) {
      // A connection still silent when the server stops would hold server.close() until the sniff timeout.
      for (const socket of undecided) socket.destroy();
      closing ??= new Promise<void>((resolve) => {
        if (sessions.size === 0) return resolve();
        const deadline = setTimeout(() => {
          for (const session of sessions) session.destroy();
        }, timeoutMs);
        deadline.unref();
        for (const session of sessions) {
          // The set drops a session on its 'close' (registered first, so already done here).
          session.once('close', () => {
            if (sessions.size > 0) return;
            clearTimeout(deadline);
            resolve();
          });
          session.close();
        }
      });
      return closing;
    },
  };
}
