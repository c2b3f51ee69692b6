import type { Server, Socket } from 'node:net';
import { Throttle, systemClock, type Clock } from '@switchyard/clock';
import { connectionKey, readRetransmitting, type UnackedState } from './kernel-tcp.ts';
import type { Metrics } from './metrics.ts';

/**
 * How long a connection's writes may wait with none of their bytes taken by
 * the peer before the connection is closed, when an app sets no other bound.
 * Far above what a reader that is there takes to make room (it reads, or its
 * kernel acknowledges), well below the kernel's retransmission timeout
 * (about 15 minutes) that would end the connection otherwise.
 */
export const WRITE_STALL_TIMEOUT_MS_DEFAULT = 60_000;

/** The longest pause between two sweeps: a stall is closed at most this long past its bound. */
const SWEEP_INTERVAL_MS_MAX = 5_000;

/** At most one warning about stalled connections in this long; the next says how many it stands for. */
const STALL_LOG_INTERVAL_MS = 10_000;

export interface WriteStallOptions {
  /** How long writes may wait with no byte taken by the peer before the connection is closed; > 0. */
  readonly stallTimeoutMs: number;
  /** Where `connections_write_stalled_total` is counted. */
  readonly metrics: Metrics;
  readonly logger: { warn(fields: Record<string, unknown>, message: string): void };
  /** Default: the system clock. */
  readonly clock?: Clock;
  /**
   * The connections the kernel is retransmitting to, by connectionKey, or
   * undefined where it cannot tell. Default: read from /proc/self/net/tcp{,6}.
   */
  readonly retransmitting?: () => Promise<ReadonlyMap<string, UnackedState> | undefined>;
}

/** Where a connection's writes stood at the sweep that last saw them move. */
interface Progress {
  /** Bytes whose writes completed (the kernel took them whole). */
  readonly completed: number;
  /** Bytes of the writes in flight the kernel has not taken yet. */
  readonly queued: number;
  readonly sinceMs: number;
}

/** What the kernel said of a connection it retransmits to, and how much the process had handed it by then. */
interface Sighting extends UnackedState {
  /** Bytes whose writes completed when the kernel's answer came: the kernel took them. */
  readonly handedBytes: number;
}

/** The last sighting of a connection the kernel retransmits to, and since when no acknowledgement was seen. */
interface Retransmitting extends Sighting {
  readonly sinceMs: number;
}

/** The part of a socket's native handle that says how much of the writes in flight the kernel has not taken. */
interface QueueHandle {
  _handle?: { writeQueueSize?: unknown } | null;
}
/** A TLS socket's TCP socket is its `_parent`. */
type WithHandle = Socket & QueueHandle & { _parent?: QueueHandle | null };

/**
 * Closes each connection `server` accepts (HTTP/1.1 ones, upgraded ones
 * included; over TLS as well; called before `serveH2c`, not those it
 * routes to HTTP/2) whose writes have waited `stallTimeoutMs` with no byte of them
 * taken by the peer, counting it in
 * `switchyard_<app>_connections_write_stalled_total` and warning at most once
 * per 10 s. The streams on it end as when their peer leaves (their upstreams
 * are cancelled).
 *
 * Why: a peer whose host vanished (powered off, partitioned: no FIN, no RST)
 * acknowledges nothing; TCP keepalive does not probe while sent data waits
 * for an acknowledgement, so a stream that keeps writing (events, progress,
 * an answer) would hold its connection, and what is behind it upstream,
 * until the kernel's retransmission timeout, about 15 minutes. Once the
 * kernel's send buffer is full, writes wait in the process, and this sees
 * them stand still.
 *
 * Guaranteed: any move of the kernel's take that the process is told of (a
 * write completing, or the part of one the kernel has not taken shrinking)
 * restarts the bound, so a reader that is there and drains is not cut, at
 * the grain said below; an idle connection (nothing waiting) never is. Costs nothing per
 * request: one timer per server sweeps its connections, every quarter of
 * the bound (at most every 5 s), reading counters each holds.
 *
 * A stream whose writes fit in the kernel's send buffer (a stream that
 * carries only keep-alive comments, 14 bytes every 15 s, takes hours to fill
 * it) never waits in the process. Node offers no TCP_USER_TIMEOUT, so on
 * Linux the sweeps also read /proc/self/net/tcp and tcp6 (asynchronously,
 * every quarter of the bound, while connections are open) for connections whose
 * retransmission timer runs: one seen retransmitting at every read for the
 * bound with no acknowledgement between two reads (its count falling back,
 * or fewer bytes unacknowledged than before plus those written since) is
 * closed the same way. Where /proc cannot be read,
 * such a stream is still ended by the kernel's retransmission timeout.
 *
 * Not covered: the kernel reports room in its send buffer in steps (when
 * about a third of it has drained), so "progress" is seen at that grain: a
 * reader draining less than a third of the send buffer within the bound
 * looks stalled.
 */
export function closeStalledWrites(server: Server, options: WriteStallOptions): void {
  const { stallTimeoutMs, logger } = options;
  if (!(stallTimeoutMs > 0)) throw new RangeError(`stallTimeoutMs must be > 0, not ${stallTimeoutMs}`);
  const clock = options.clock ?? systemClock;
  const closed = options.metrics.counter({
    name: 'connections_write_stalled_total',
    help: 'Connections closed because their peer took no byte written to them for the write stall timeout (its host vanished, most likely)',
  });
  const throttle = new Throttle(clock, STALL_LOG_INTERVAL_MS, 1);
  /** Every open connection; a Progress for those whose writes wait. */
  const open = new Map<Socket, Progress | undefined>();
  /** Connections seen retransmitting with nothing waiting in the process, since when. */
  const unacked = new Map<Socket, Retransmitting>();
  const sweepMs = Math.min(SWEEP_INTERVAL_MS_MAX, Math.max(1, Math.floor(stallTimeoutMs / 4)));

  function forget(this: Socket): void {
    open.delete(this);
    unacked.delete(this);
  }
  // An HTTPS server hands HTTP/1.1 the decrypted connection, once the handshake is done.
  server.on('addContext' in server ? 'secureConnection' : 'connection', (socket: Socket) => {
    open.set(socket, undefined);
    // on, not once: once wraps the listener in a closure per connection, and a gateway holds tens of thousands.
    socket.on('close', forget);
  });

  const retransmittingNow = options.retransmitting ?? readRetransmitting;

  const close = (socket: Socket, why: string): void => {
    open.delete(socket);
    unacked.delete(socket);
    closed.inc();
    const unlogged = throttle.pass('stalled');
    if (unlogged !== undefined) {
      logger.warn(
        {
          stallTimeoutMs,
          remote: socket.remoteAddress,
          waiting: socket.writableLength,
          why,
          ...(unlogged ? { unlogged } : {}),
        },
        'closed a connection whose peer took no byte written to it for the write stall timeout',
      );
    }
    socket.destroy();
  };

  /**
   * A connection seen retransmitting at every sweep for the bound with no acknowledgement in between is closed.
   * Its count falls back at an acknowledgement but climbs again at the next loss, so sweeps seconds apart can see
   * it at 1 each time on a lossy link: an acknowledgement also shows as fewer bytes unacknowledged than before
   * plus those handed over since (exact on TCP; over TLS the handed count is plaintext, less than went out).
   */
  const sweepUnacked = (socket: Socket, seen: Sighting | undefined, now: number): void => {
    const last = unacked.get(socket);
    if (!seen) return void (last && unacked.delete(socket));
    const acknowledged =
      !last ||
      seen.retransmits < last.retransmits ||
      seen.unackedBytes < last.unackedBytes + (seen.handedBytes - last.handedBytes);
    unacked.set(socket, { ...seen, sinceMs: acknowledged ? now : last.sinceMs });
    if (!acknowledged && now - last.sinceMs >= stallTimeoutMs) close(socket, 'unacknowledged');
  };

  const sweep = (kernel: ReadonlyMap<Socket, Sighting> | undefined): void => {
    const now = clock.monotonicNow();
    for (const [socket, last] of open) {
      if (socket.destroyed) continue;
      if (socket.writableLength === 0) {
        if (last) open.set(socket, undefined);
        if (kernel) sweepUnacked(socket, kernel.get(socket), now);
        continue;
      }
      unacked.delete(socket);
      const seen = progressOf(socket as WithHandle, now);
      if (!last || seen.completed !== last.completed || seen.queued < last.queued) {
        open.set(socket, seen);
        continue;
      }
      if (now - last.sinceMs >= stallTimeoutMs) close(socket, 'waiting');
    }
  };
  /**
   * The bytes each connection had handed the kernel by the time its answer came, at most a little after it was
   * written: a write in between reads as an acknowledgement, which restarts the bound rather than cuts early.
   */
  const sighted = (found: ReadonlyMap<string, UnackedState>): Map<Socket, Sighting> => {
    const sightings = new Map<Socket, Sighting>();
    if (found.size === 0) return sightings;
    for (const socket of open.keys()) {
      const { localAddress, localPort, remoteAddress, remotePort } = socket;
      if (!(localAddress && localPort && remoteAddress && remotePort)) continue;
      const state = found.get(connectionKey(localAddress, localPort, remoteAddress, remotePort));
      if (state) sightings.set(socket, { ...state, handedBytes: socket.bytesWritten - socket.writableLength });
    }
    return sightings;
  };
  /** The kernel's latest answer, read between sweeps so a sweep never waits; each is used once. */
  let kernel: ReadonlyMap<Socket, Sighting> | undefined;
  let reading = false;
  let stopped = false;
  const read = (): void => {
    if (reading || open.size === 0) return;
    reading = true;
    retransmittingNow().then(
      (found) => {
        reading = false;
        if (!stopped && found) kernel = sighted(found);
      },
      () => void (reading = false),
    );
  };
  // The kernel is read every quarter of the bound, not at every sweep (at most every 5 s): a read formats every
  // socket of the network namespace, and four sightings a bound tell a vanished peer as well as twelve.
  const readEveryTicks = Math.max(1, Math.round(Math.floor(stallTimeoutMs / 4) / sweepMs));
  let ticks = 0;
  let timer = clock.setTimeout(function tick() {
    const seen = kernel;
    kernel = undefined;
    sweep(seen);
    if (++ticks % readEveryTicks === 0) read();
    timer = clock.setTimeout(tick, sweepMs);
  }, sweepMs);
  server.once('close', () => {
    stopped = true;
    timer.cancel();
  });
}

function progressOf(socket: WithHandle, sinceMs: number): Progress {
  // Node's own `socket.bufferSize` reads this: a write in flight completes only once the kernel has taken all of
  // it (Node hands the kernel every buffered chunk as one write), so this is where a slow reader's progress shows.
  // Over TLS, the TCP socket's queue: the TLS layer's own count does not move until its write completes.
  const queued = (socket._parent ?? socket)._handle?.writeQueueSize;
  return {
    completed: socket.bytesWritten - socket.writableLength,
    queued: typeof queued === 'number' ? queued : 0,
    sinceMs,
  };
}
