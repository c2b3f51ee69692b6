import { Throttle, type Clock } from '@switchyard/clock';
import type { TunnelLogger } from './defaults.ts';

/**
 * At most one line per refusal reason in this long. The connect path is the
 * one a scheduler exposes beyond the cluster, and it refuses before knowing
 * who asks: a line per refused request would let anyone who reaches it fill
 * the scheduler's disk, and a runtime with a stale token redials for ever.
 */
export const REFUSAL_LOG_INTERVAL_MS = 10_000;
/** Reasons remembered; they are the endpoint's own fixed texts, so this is only a backstop. */
const REASONS_MAX = 64;

/** A refusal's status and error (its reason), and whatever else the line says. */
export interface RefusalFields {
  readonly status: number;
  readonly error: string;
  readonly [field: string]: unknown;
}

/**
 * Warns of refused connects: the first of a reason (status and error) at
 * once, later ones at most once per REFUSAL_LOG_INTERVAL_MS with how many
 * were held back meanwhile (`unlogged`) and the latest request's fields.
 */
export class RefusalLog {
  readonly #logger: TunnelLogger;
  readonly #throttle: Throttle;

  constructor(logger: TunnelLogger, clock: Clock) {
    this.#logger = logger;
    this.#throttle = new Throttle(clock, REFUSAL_LOG_INTERVAL_MS, REASONS_MAX);
  }

  warn(message: string, fields: RefusalFields): void {
    const unlogged = this.#throttle.pass(`${fields.status} ${fields.error}\n${message}`);
    if (unlogged === undefined) return;
    this.#logger.warn({ ...fields, ...(unlogged ? { unlogged } : {}) }, message);
  }
}
