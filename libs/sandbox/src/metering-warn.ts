import { Throttle, type Clock, type Timer } from '@switchyard/clock';
import type { Logger } from './types.ts';

/**
 * At most one warning per kind (connection error, refused write, dropped
 * event) in this long: while Redis is down ioredis reports every reconnect
 * attempt, and while it refuses writes or the queue is full every sandbox
 * start and recycle would add a line.
 */
export const METERING_WARN_INTERVAL_MS = 10_000;

/** More fields of a warning line, e.g. a running count. */
type Fields = Readonly<Record<string, unknown>>;

export type Warn = ((event: string, err: string | undefined, msg: string, fields?: Fields) => void) & {
  flush(stillBack: () => boolean): void;
  cancel(): void;
};

/**
 * Warns of `event` at once, then at most once per METERING_WARN_INTERVAL_MS,
 * counting the rest (`unlogged`). A line told later for the ones held back
 * carries the `fields` of the last of them.
 */
export function throttledWarn(logger: Logger | undefined, clock: Clock): Warn {
  const throttle = new Throttle(clock, METERING_WARN_INTERVAL_MS);
  /** Each event's message and fields, as last warned of (the sink's own few events, so bounded). */
  const last = new Map<string, { msg: string; fields: Fields | undefined }>();
  const log = (event: string, err: string | undefined, msg: string, unlogged: number, fields?: Fields): void =>
    logger?.warn({ event, ...(err !== undefined && { err }), ...(unlogged > 0 && { unlogged }), ...fields }, msg);
  /** When a warning or a flush was last logged: the next flush waits an interval from it. */
  let toldAtMs = -Infinity;
  const warn = (event: string, err: string | undefined, msg: string, fields?: Fields): void => {
    last.set(event, { msg, fields });
    const unlogged = throttle.pass(event);
    if (unlogged === undefined) return;
    toldAtMs = clock.monotonicNow();
    log(event, err, msg, unlogged, fields);
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
    for (const [event, unlogged] of throttle.flush()) {
      const { msg, fields } = last.get(event) ?? { msg: event, fields: undefined };
      log(event, undefined, msg, unlogged, fields);
    }
  };
  warn.cancel = (): void => {
    deferred?.cancel();
    deferred = undefined;
  };
  return warn;
}
