import type { Clock } from '@switchyard/clock';
import type { GatewayLogger } from './options.ts';

/** At most one line per upstream in this long: until an operator fixes the token, every request is refused alike. */
export const REFUSAL_LOG_INTERVAL_MS = 10_000;
/** Upstreams remembered (runtime URLs in direct mode come and go); past it the memory starts over. */
const UPSTREAMS_MAX = 1024;

/**
 * Logs, at error level, that an upstream refused this gateway's own token
 * (a scheduler its API token, a runtime its upstream token): the first
 * refusal by an upstream at once, later ones at most once per
 * REFUSAL_LOG_INTERVAL_MS, saying how many were not logged meanwhile.
 */
export class RefusalLog {
  readonly #logger: GatewayLogger;
  readonly #clock: Clock;
  readonly #byUpstream = new Map<string, { loggedAt: number; unlogged: number }>();

  constructor(logger: GatewayLogger, clock: Clock) {
    this.#logger = logger;
    this.#clock = clock;
  }

  refused(upstream: string, message: string): void {
    const now = this.#clock.now();
    const seen = this.#byUpstream.get(upstream);
    if (seen && now - seen.loggedAt < REFUSAL_LOG_INTERVAL_MS) {
      seen.unlogged++;
      return;
    }
    if (!seen && this.#byUpstream.size >= UPSTREAMS_MAX) this.#byUpstream.clear();
    this.#logger.error({ upstream, ...(seen?.unlogged ? { unlogged: seen.unlogged } : {}) }, message);
    this.#byUpstream.set(upstream, { loggedAt: now, unlogged: 0 });
  }
}
