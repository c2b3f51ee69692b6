import { Throttle, type Clock } from '@switchyard/clock';
import type { Unschedulable } from '@switchyard/protocol';
import { REASONS } from '@switchyard/scheduling';
import type { ReplicaLogger } from './options.ts';

/**
 * At most one warning per reason in this long: a full fleet or a class no
 * runtime serves refuses every request alike, gateways ask again for each
 * session they wait on, and their clients choose the class, so a warning
 * per request would bury the log (and keying by class would let a client
 * defeat the throttle by naming a new one each time).
 */
export const UNSCHEDULABLE_LOG_INTERVAL_MS = 10_000;

/**
 * Logs unschedulable requests: the first of each reason (stage and code)
 * as a warning at once, then at most one per UNSCHEDULABLE_LOG_INTERVAL_MS
 * with how many were held back (`unlogged`); every other one, every
 * explain (a dry run), and every request whose candidates it excluded
 * itself, at debug. A gateway excludes the runtimes it failed to start a
 * sandbox on and asks again: that none is left is its own doing, which it
 * warns of itself, not the cluster's, and every replica asked would warn.
 */
export class UnschedulableLog {
  readonly #logger: ReplicaLogger;
  readonly #throttle: Throttle;

  constructor(logger: ReplicaLogger, clock: Clock) {
    this.#logger = logger;
    this.#throttle = new Throttle(clock, UNSCHEDULABLE_LOG_INTERVAL_MS);
  }

  log(fields: { readonly reason: Unschedulable } & Record<string, unknown>, explain: boolean): void {
    const quiet = explain || fields.reason.code === REASONS.allExcluded;
    const unlogged = quiet ? undefined : this.#throttle.pass(`${fields.reason.stage}\n${fields.reason.code}`);
    if (unlogged === undefined) return this.#logger.debug(fields, 'unschedulable');
    this.#logger.warn({ ...fields, ...(unlogged ? { unlogged } : {}) }, 'unschedulable');
  }
}
