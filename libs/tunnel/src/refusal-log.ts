import type { Clock } from '@switchyard/clock';
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
  readonly #clock: Clock;
  readonly #seen = new Map<string, { loggedAt: number; unlogged: number }>();

  constructor(logger: TunnelLogger, clock: Clock) {
    this.#logger = logger;
    this.#clock = clock;
  }

  warn(message: string, fields: RefusalFields): void {
    const key = `${fields.status} ${fields.error}\n${message}`;
    const now = this.#clock.now();
    const seen = this.#seen.get(key);
    if (seen && now - seen.loggedAt < REFUSAL_LOG_INTERVAL_MS) {
      seen.unlogged++;
      return;
    }
    if (!seen && this.#seen.size >= REASONS_MAX) this.#seen.clear();
    this.#logger.warn({ ...fields, ...(seen?.unlogged ? { unlogged: seen.unlogged } : {}) }, message);
    this.#seen.set(key, { loggedAt: now, unlogged: 0 });
  }
}
