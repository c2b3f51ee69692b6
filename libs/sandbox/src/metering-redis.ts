import { randomUUID } from 'node:crypto';
import { createRequire } from 'node:module';
import type * as IORedis from 'ioredis';
import { Throttle, systemClock, type Clock, type Timer } from '@switchyard/clock';
import { SwitchyardError } from '@switchyard/protocol';
import { RedisBackoff, redisTlsOptions, redisUrlProblem } from '@switchyard/service';
import type { Logger, MeteringEvent, MeteringSink } from './types.ts';

export interface RedisMeteringSinkOptions {
  /**
   * `redis[s]://[user:password@]host[:port][/db]`, checked by `redisUrlProblem`
   * (as the gateway's route cache is); `rediss://` to a host name sends it as SNI.
   */
  readonly url: string;
  /** Stream key events are appended to with XADD. */
  readonly stream: string;
  /** Approximate stream length kept (`MAXLEN ~`). Default 100 000. */
  readonly streamLengthMax?: number;
  readonly logger?: Logger;
  /** Stamps each event's `atMs` and paces the warnings of a Redis that is down. Default: the system clock. */
  readonly clock?: Clock;
}

/**
 * At most one warning per kind (connection error, failed write) in this
 * long: while Redis is down every sandbox start and recycle fails its write,
 * and ioredis reports every reconnect attempt, a line each.
 */
const METERING_WARN_INTERVAL_MS = 10_000;

/**
 * Appends an event unless its mark (KEYS[2]) says it was appended already:
 * ioredis sends a write again on its next connection when the last one
 * dropped before the answer, and Redis may have written it. The mark lives
 * METERING_WRITTEN_MARK_MS, well past the few reconnections a write is
 * retried over.
 */
const XADD_ONCE = `if redis.call('SET', KEYS[2], '', 'NX', 'PX', ARGV[1]) then
  return redis.call('XADD', KEYS[1], 'MAXLEN', '~', ARGV[2], '*', unpack(ARGV, 3))
end
return false`;
const METERING_WRITTEN_MARK_MS = 10 * 60_000;

/**
 * How long `close()` waits for the writes still pending (QUIT is answered
 * after them): a Redis that holds its connection and answers nothing would
 * otherwise hold the runtime's shutdown for ever.
 */
const METERING_CLOSE_WAIT_MS = 2_000;

/**
 * How long a write may go unanswered before its connection, which brought
 * no byte for as long, is dropped and Redis dialled again (ioredis'
 * socketTimeout); the writes unanswered are sent again on the next
 * connection (see XADD_ONCE). A Redis whose host is gone without a reset
 * (a failover's old primary powered off) would otherwise hold every write
 * for as long as the kernel keeps the connection, some 15 minutes, while
 * the endpoint already leads to the new primary. Far above a Redis's answer
 * time, and no shorter than the backoff's longest pause, so a Redis that
 * answers the handshake and then stalls is not dialled faster than that.
 */
const METERING_ANSWER_TIMEOUT_MS = 2_000;

/**
 * A primary demoted by a failover stays up, keeps its connections, and
 * answers every write with READONLY; a managed Redis moves its endpoint to
 * the new primary, which only a new connection reaches. Reconnect then
 * (paced by RedisBackoff), the write failing as any other.
 */
function reconnectsOnError(error: Error): 1 | false {
  return error.message.startsWith('READONLY') ? 1 : false;
}

/**
 * Appends events to a Redis stream (XADD, trimmed to `streamLengthMax`),
 * the fields of each MeteringEvent (durationMs rounded) and `atMs`, the
 * time it was recorded (ms since the epoch, on `clock`), each once, though the client may send a write again (see XADD_ONCE): a
 * key `<stream>:written:<uuid>` per event marks it written for 10 min.
 * Fire-and-forget: a failed write is logged, never thrown; ioredis queues
 * writes while it reconnects (bounded by its offline queue). Redials are
 * paced by RedisBackoff (a random pause under 50 ms doubling to 2 s), also
 * from a Redis that is ready for a moment only: a demoted primary, left at
 * its first READONLY, or one that leaves a write unanswered for
 * METERING_ANSWER_TIMEOUT_MS. Connection
 * errors and failed writes are each warned of at once, then at most once per
 * METERING_WARN_INTERVAL_MS with how many were not logged meanwhile
 * (`unlogged`; for writes, events lost); those still uncounted when Redis is
 * back are reported then. `close()` waits for pending writes up to
 * METERING_CLOSE_WAIT_MS, then drops the connection and warns of how many
 * events it did not write (`metering.close_abandoned`, `unwritten`).
 */
export function redisMeteringSink(opts: RedisMeteringSinkOptions): MeteringSink & { close(): Promise<void> } {
  // Refused, not dialled: ioredis would read it as another host, database or no TLS. Never quoted (a password).
  const problem = redisUrlProblem(opts.url);
  if (problem) throw new SwitchyardError('invalid_request', `metering redisUrl ${problem}`);
  // Required here, not imported above: runtimes that log their metering never load the client.
  const { Redis } = createRequire(import.meta.url)('ioredis') as typeof IORedis;
  const clock = opts.clock ?? systemClock;
  // On the system clock, as ioredis' own timers: `clock` stamps events and paces the warnings only.
  const backoff = new RedisBackoff(systemClock);
  const redis = new Redis(opts.url, {
    ...redisTlsOptions(opts.url),
    lazyConnect: false,
    maxRetriesPerRequest: 2,
    socketTimeout: METERING_ANSWER_TIMEOUT_MS,
    reconnectOnError: reconnectsOnError,
    retryStrategy: () => backoff.nextDelayMs(),
  });
  const lengthMax = opts.streamLengthMax ?? 100_000;
  const warn = throttledWarn(opts.logger, clock);
  redis.on('error', (error: Error) => warn('metering.redis_error', error.message, 'redis'));
  let ready = false;
  redis.on('ready', () => {
    ready = true;
    backoff.ready();
    warn.flush(() => ready);
  });
  redis.on('close', () => (ready = false));
  let closed = false;
  /** Writes sent and not yet answered. */
  let pending = 0;
  return {
    record(e: MeteringEvent): void {
      if (closed) return;
      const fields = ['event', e.event, 'class', e.class, 'process', e.process, 'reason', e.reason];
      pending++;
      const mark = `${opts.stream}:written:${randomUUID()}`;
      const durationMs = String(Math.round(e.durationMs));
      // A write that waited has the stream id of the time Redis took it: the event says when it happened.
      const atMs = String(clock.now());
      redis
        .eval(
          XADD_ONCE,
          2,
          opts.stream,
          mark,
          METERING_WRITTEN_MARK_MS,
          lengthMax,
          ...fields,
          'durationMs',
          durationMs,
          'atMs',
          atMs,
        )
        .catch((error: unknown) => warn('metering.write_failed', String(error), 'xadd'))
        .finally(() => pending--);
    },
    async close(): Promise<void> {
      if (closed) return;
      closed = true;
      warn.cancel();
      let timer: Timer | undefined;
      const quit = redis.quit().then(
        () => 'quit' as const,
        () => 'failed' as const,
      );
      const waited = new Promise<'timeout'>((resolve) => {
        timer = clock.setTimeout(() => resolve('timeout'), METERING_CLOSE_WAIT_MS);
      });
      const outcome = await Promise.race([quit, waited]);
      timer?.cancel();
      if (outcome === 'quit') return;
      // A refused QUIT follows writes that failed, each already warned of; a silent Redis had them pending.
      if (outcome === 'timeout' && pending > 0) {
        opts.logger?.warn(
          { event: 'metering.close_abandoned', unwritten: pending },
          'metering events not written: Redis did not answer before close',
        );
      }
      redis.disconnect();
    },
  };
}

type Warn = ((event: string, err: string, msg: string) => void) & {
  flush(stillBack: () => boolean): void;
  cancel(): void;
};

/** Warns of `event` at once, then at most once per METERING_WARN_INTERVAL_MS, counting the rest. */
function throttledWarn(logger: Logger | undefined, clock: Clock): Warn {
  const throttle = new Throttle(clock, METERING_WARN_INTERVAL_MS);
  /** Each event's message (the sink's own two events, so bounded). */
  const messages = new Map<string, string>();
  const log = (event: string, err: string | undefined, msg: string, unlogged: number): void =>
    logger?.warn({ event, ...(err !== undefined && { err }), ...(unlogged > 0 && { unlogged }) }, msg);
  /** When a warning or a flush was last logged: the next flush waits an interval from it. */
  let toldAtMs = -Infinity;
  const warn = (event: string, err: string, msg: string): void => {
    messages.set(event, msg);
    const unlogged = throttle.pass(event);
    if (unlogged === undefined) return;
    toldAtMs = clock.monotonicNow();
    log(event, err, msg, unlogged);
  };
  // A Redis that flaps (ready, then cut off, again and again) is back once per flap: at most one flush per
  // interval, or each would tell a count and let the next error through, a line or two per flap. Counted
  // from the last warning too: a connection cut before its first ready is back (and flushed) right after.
  let deferred: Timer | undefined;
  /**
   * Redis is back: what was held back is told now, and the next trouble is
   * warned of at once; within METERING_WARN_INTERVAL_MS of the last warning
   * or flush, once that interval is up, if Redis is `stillBack()` then.
   */
  warn.flush = (stillBack: () => boolean): void => {
    const waitMs = toldAtMs + METERING_WARN_INTERVAL_MS - clock.monotonicNow();
    if (waitMs > 0) {
      deferred ??= clock.setTimeout(() => {
        deferred = undefined;
        if (stillBack()) warn.flush(stillBack);
      }, waitMs);
      return;
    }
    toldAtMs = clock.monotonicNow();
    for (const [event, unlogged] of throttle.flush()) log(event, undefined, messages.get(event) ?? event, unlogged);
  };
  warn.cancel = (): void => {
    deferred?.cancel();
    deferred = undefined;
  };
  return warn;
}
