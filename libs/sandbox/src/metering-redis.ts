import { randomUUID } from 'node:crypto';
import { createRequire } from 'node:module';
import type * as IORedis from 'ioredis';
import { systemClock, type Clock, type Timer } from '@switchyard/clock';
import { SwitchyardError } from '@switchyard/protocol';
import { RedisBackoff, redisTlsOptions, redisUrlProblem, type Metrics } from '@switchyard/service';
import { WriteBacklog } from './metering-backlog.ts';
import { throttledWarn } from './metering-warn.ts';
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
  /**
   * Most events waiting to be written (while Redis is unreachable, or
   * refuses writes for a passing reason), besides the batch being written
   * (at most 100); past it the oldest are dropped. Default
   * METERING_QUEUE_LENGTH_MAX_DEFAULT.
   */
  readonly queueLengthMax?: number;
  readonly logger?: Logger;
  /**
   * Where `metering_events_waiting` (events not yet written) and
   * `metering_events_dropped_total{reason}` (`queue_full`, `refused`) are
   * registered: the warnings are throttled, these count every event.
   */
  readonly metrics?: Metrics;
  /** Stamps each event's `atMs` and paces the warnings of a Redis that is down. Default: the system clock. */
  readonly clock?: Clock;
}

/**
 * Events held while they cannot be written: about 1 KB each, so some 10 MB
 * at most; at a few sandbox starts and recycles a second, minutes of a
 * Redis away.
 */
export const METERING_QUEUE_LENGTH_MAX_DEFAULT = 10_000;

/**
 * Events per write: a queue of 10,000 is written in 100 round trips, each
 * script running well under a millisecond, so Redis serves its other
 * clients between them.
 */
const METERING_BATCH_MAX = 100;

/**
 * Pause before a write refused for a passing reason (OOM, LOADING, BUSY) is
 * sent again on the same connection; a new connection sends it at once.
 */
const METERING_RETRY_PAUSE_MS = 1_000;

/**
 * Appends each event of a batch (KEYS[1] the stream; KEYS[2..] one mark per
 * event; ARGV: the mark's lifetime, MAXLEN, fields per event, then the
 * events' fields) unless its mark says it was appended already: a batch
 * whose answer was lost (its connection dropped) is sent again, and Redis
 * may have written it, or the part of it before a refusal (a script stops
 * at its first error, keeping what it wrote). A refusal for now (OOM,
 * READONLY, MISCONF, NOREPLICAS) comes at a script's first write, a SET,
 * before any mark; an XADD refused after its SET (WRONGTYPE) is refused for
 * good, and its batch is not sent again. The mark lives
 * METERING_WRITTEN_MARK_MS: a batch whose answer was lost and whose Redis
 * then stays away longer may be written twice in part.
 */
const XADD_ONCE = `local width = tonumber(ARGV[3])
for i = 2, #KEYS do
  if redis.call('SET', KEYS[i], '', 'NX', 'PX', ARGV[1]) then
    local first = 4 + (i - 2) * width
    redis.call('XADD', KEYS[1], 'MAXLEN', '~', ARGV[2], '*', unpack(ARGV, first, first + width - 1))
  end
end
return #KEYS - 1`;
const METERING_WRITTEN_MARK_MS = 10 * 60_000;

/**
 * How long `close()` waits for the events not yet written (QUIT is sent,
 * and answered, after them): a Redis that holds its connection and answers
 * nothing would otherwise hold the runtime's shutdown for ever.
 */
const METERING_CLOSE_WAIT_MS = 2_000;

/**
 * How long a write may go unanswered before its connection, which brought
 * no byte for as long, is dropped and Redis dialled again (ioredis'
 * socketTimeout); the events unanswered are sent again on the next
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
 * (paced by RedisBackoff); the events refused are sent again there.
 */
function reconnectsOnError(error: Error): 1 | false {
  return error.message.startsWith('READONLY') ? 1 : false;
}

/**
 * Refusals a later attempt may not meet: Redis out of memory, loading its
 * data, busy with a script, a replica or a primary without its replicas,
 * failing to persist (MISCONF), a cluster reconfiguring, a script not
 * loaded, credentials or an ACL not granted yet. Any other (WRONGTYPE: the
 * stream key holds something else; an unknown command) meets every resend
 * alike. Redis before 7 wraps the error of a command run by a script in an
 * ERR, the command's code after a "-".
 */
const PASSING_REFUSAL =
  /(?:^|\s-)(?:OOM|LOADING|BUSY|READONLY|MASTERDOWN|NOREPLICAS|MISCONF|TRYAGAIN|CLUSTERDOWN|NOSCRIPT|NOAUTH|NOPERM)\b/;

/** Redis answered the write with an error. Anything else (a connection lost, an answer late) is no answer. */
function isRefusal(error: unknown): error is Error {
  return error instanceof Error && error.name === 'ReplyError';
}

function refusedForGood(error: unknown): boolean {
  return isRefusal(error) && !PASSING_REFUSAL.test(error.message);
}

interface Entry {
  /** Key `<stream>:written:<uuid>` that marks the event written (see XADD_ONCE). */
  readonly mark: string;
  readonly fields: readonly string[];
}

function entry(stream: string, e: MeteringEvent, atMs: number): Entry {
  const fields = ['event', e.event, 'class', e.class, 'process', e.process, 'reason', e.reason];
  // A write that waited has the stream id of the time Redis took it: the event says when it happened.
  const times = ['durationMs', String(Math.round(e.durationMs)), 'atMs', String(atMs)];
  return { mark: `${stream}:written:${randomUUID()}`, fields: [...fields, ...times] };
}

/**
 * Appends events to a Redis stream (XADD, trimmed to `streamLengthMax`),
 * the fields of each MeteringEvent (durationMs rounded) and `atMs`, the
 * time it was recorded (ms since the epoch, on `clock`). Fire-and-forget:
 * `record` never throws nor waits. Events wait in a queue of the sink's own
 * (at most `queueLengthMax`; past it the oldest are dropped) while Redis is
 * unreachable or refuses them for a passing reason (see PASSING_REFUSAL),
 * however long, and are written in the order recorded, each once, though a
 * batch whose answer was lost is sent again (see XADD_ONCE; a key
 * `<stream>:written:<uuid>` per event marks it written for 10 min). The
 * events of a write Redis refuses for good (WRONGTYPE) are dropped. Redials
 * are paced by RedisBackoff (a random pause under 50 ms doubling to 2 s),
 * also from a Redis that is ready for a moment only: a demoted primary,
 * left at its first READONLY, or one that leaves a write unanswered for
 * METERING_ANSWER_TIMEOUT_MS. Connection errors (`metering.redis_error`),
 * refusals for now (`metering.write_deferred`), events refused
 * (`metering.write_failed`) and events dropped from a full queue
 * (`metering.queue_full`, with `dropped`, all so far) are each warned of
 * at once, then at most once per METERING_WARN_INTERVAL_MS with how many
 * were not logged meanwhile (`unlogged`: errors, refused writes, events
 * refused, events dropped); those still uncounted when Redis is back are
 * reported then. `close()` writes what waits, up to METERING_CLOSE_WAIT_MS,
 * then drops the connection and warns of how many events it did not write
 * (`metering.close_abandoned`, `unwritten`: those waiting and those sent
 * unanswered). Not guaranteed: events still held by a runtime that dies or
 * is killed.
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
    // The events wait in the sink's queue, not in ioredis' (which gave them up every third failed dial), and
    // are sent on a ready connection only: one sent when its connection closes fails then, and the sink sends
    // it again, before those after it.
    enableOfflineQueue: false,
    autoResendUnfulfilledCommands: false,
    maxRetriesPerRequest: 0,
    socketTimeout: METERING_ANSWER_TIMEOUT_MS,
    reconnectOnError: reconnectsOnError,
    retryStrategy: () => backoff.nextDelayMs(),
  });
  const lengthMax = opts.streamLengthMax ?? 100_000;
  const warn = throttledWarn(opts.logger, clock);
  const dropped = opts.metrics?.counter({
    name: 'metering_events_dropped_total',
    help: 'Metering events given up: the oldest waiting, past metering.queueLengthMax (queue_full), or refused for good by Redis (refused)',
    labelNames: ['reason'],
  });
  for (const reason of ['queue_full', 'refused']) dropped?.inc({ reason }, 0);
  const queue = new WriteBacklog<Entry>({
    lengthMax: opts.queueLengthMax ?? METERING_QUEUE_LENGTH_MAX_DEFAULT,
    batchMax: METERING_BATCH_MAX,
    canSend: () => redis.status === 'ready',
    send: async (batch) => {
      const marks = batch.map((e) => e.mark);
      const fields = batch.flatMap((e) => e.fields);
      const width = batch[0]!.fields.length;
      await redis.eval(
        XADD_ONCE,
        1 + batch.length,
        opts.stream,
        ...marks,
        METERING_WRITTEN_MARK_MS,
        lengthMax,
        width,
        ...fields,
      );
    },
    refusedForGood,
    onDropped: (all) => {
      dropped?.inc({ reason: 'queue_full' });
      warn('metering.queue_full', undefined, 'metering event dropped: queue full', { dropped: all });
    },
    onRefused: (error) => {
      dropped?.inc({ reason: 'refused' });
      warn('metering.write_failed', String(error), 'metering event dropped: Redis refused it');
    },
    // A connection lost is warned of as such (metering.redis_error).
    onDeferred: (error) => {
      if (isRefusal(error)) warn('metering.write_deferred', String(error), 'metering events kept: Redis refused them');
    },
    retryPauseMs: METERING_RETRY_PAUSE_MS,
    clock: systemClock,
  });
  opts.metrics?.gauge({
    name: 'metering_events_waiting',
    help: 'Metering events recorded and not yet written to Redis (waiting, or sent and not answered)',
    collect: () => queue.size,
  });
  redis.on('error', (error: Error) => warn('metering.redis_error', error.message, 'redis'));
  let ready = false;
  redis.on('ready', () => {
    ready = true;
    backoff.ready();
    warn.flush(() => ready);
    queue.wake();
  });
  redis.on('close', () => (ready = false));
  let closed = false;
  return {
    record(e: MeteringEvent): void {
      if (!closed) queue.push(entry(opts.stream, e, clock.now()));
    },
    async close(): Promise<void> {
      if (closed) return;
      closed = true;
      warn.cancel();
      let timer: Timer | undefined;
      // QUIT once what waits is written: sent meanwhile, it would be refused while Redis is away.
      const quit = queue
        .drained()
        .then(() => redis.quit())
        .then(
          () => 'quit' as const,
          () => 'failed' as const,
        );
      const waited = new Promise<'timeout'>((resolve) => {
        timer = clock.setTimeout(() => resolve('timeout'), METERING_CLOSE_WAIT_MS);
      });
      const outcome = await Promise.race([quit, waited]);
      timer?.cancel();
      queue.stop();
      if (outcome === 'quit') return;
      // A refused QUIT came after every event was written or dropped (each dropped one warned of).
      if (outcome === 'timeout' && queue.size > 0) {
        opts.logger?.warn(
          { event: 'metering.close_abandoned', unwritten: queue.size },
          'metering events not written: Redis did not take them before close',
        );
      }
      redis.disconnect();
    },
  };
}
