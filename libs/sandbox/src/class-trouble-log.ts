import { Throttle, type Clock } from '@switchyard/clock';
import type { Logger } from './types.ts';

/**
 * At most one warning per class and event in this long: a server that
 * fails every start, or dies on every call, does so once per request, and
 * a warning each (with its stderr lines) would bury the runtime's log.
 */
export const CLASS_TROUBLE_LOG_INTERVAL_MS = 10_000;

/**
 * Warns of trouble with a sandbox class: the first of each class and event
 * at once, then at most one per CLASS_TROUBLE_LOG_INTERVAL_MS with how many
 * were held back meanwhile (`unlogged`); the others go to debug with the
 * same fields, so one sandbox's trouble can still be looked up there. Keys
 * are configured classes and a few fixed events, so they stay few.
 */
export class ClassTroubleLog {
  readonly #logger: Logger;
  readonly #throttle: Throttle;

  constructor(logger: Logger, clock: Clock) {
    this.#logger = logger;
    this.#throttle = new Throttle(clock, CLASS_TROUBLE_LOG_INTERVAL_MS);
  }

  warn(fields: { readonly event: string; readonly class: string } & Record<string, unknown>, msg: string): void {
    const unlogged = this.#throttle.pass(`${fields.event}\n${fields.class}`);
    if (unlogged === undefined) return this.#logger.debug(fields, msg);
    this.#logger.warn({ ...fields, ...(unlogged ? { unlogged } : {}) }, msg);
  }
}
