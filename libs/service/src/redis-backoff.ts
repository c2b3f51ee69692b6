import type { Clock } from '@switchyard/clock';

/** The longest pause before the first redial of a connection that served a while. */
export const REDIS_REDIAL_FIRST_MS = 50;
/** The longest pause between dials, however long Redis stays away: also how soon a client sees it back. */
export const REDIS_REDIAL_MAX_MS = 2_000;
/**
 * How long a connection must stay ready for the backoff to start over. A
 * connection that becomes ready and fails at once (a demoted primary
 * answering READONLY, a Redis that answers the handshake and then stalls)
 * does not: were ready enough, as it is for ioredis' own count, each
 * client would redial such a Redis several times a second. Never
 * shorter than the longest pause, so no loop redials faster than that.
 */
export const REDIS_HEALTHY_AFTER_MS = REDIS_REDIAL_MAX_MS;
/** Beyond this the ceiling is at its maximum already; keeps the exponent finite. */
const DOUBLINGS_MAX = 16;

/**
 * Pauses before each redial to Redis, for every ioredis client of the
 * product (a gateway's route cache, a runtime's metering): exponential
 * backoff with full jitter (a random pause up to a ceiling of 50 ms doubling
 * to 2 s), so the replicas that lost one Redis together do not dial it
 * together. ioredis' own strategy adds at most 200 ms to a ceiling of
 * 5 s, and counts from 1 again at every ready connection. Not guaranteed:
 * any one pause, which may be 0.
 */
export class RedisBackoff {
  readonly #clock: Pick<Clock, 'monotonicNow'>;
  readonly #random: () => number;
  #doublings = 0;
  #readyAtMs: number | undefined;

  constructor(clock: Pick<Clock, 'monotonicNow'>, random: () => number = Math.random) {
    this.#clock = clock;
    this.#random = random;
  }

  /** The connection is ready: once it has served REDIS_HEALTHY_AFTER_MS, its loss starts the backoff over. */
  ready(): void {
    this.#readyAtMs = this.#clock.monotonicNow();
  }

  /** The connection closed or a dial failed: how long to wait before the next dial (ioredis' `retryStrategy`). */
  nextDelayMs(): number {
    const servedMs = this.#readyAtMs === undefined ? 0 : this.#clock.monotonicNow() - this.#readyAtMs;
    this.#readyAtMs = undefined;
    if (servedMs >= REDIS_HEALTHY_AFTER_MS) this.#doublings = 0;
    const ceilingMs = Math.min(REDIS_REDIAL_MAX_MS, REDIS_REDIAL_FIRST_MS * 2 ** this.#doublings);
    this.#doublings = Math.min(this.#doublings + 1, DOUBLINGS_MAX);
    return Math.floor(this.#random() * ceilingMs);
  }
}
