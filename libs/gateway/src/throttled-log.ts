import type { Clock } from '@switchyard/clock';
import type { GatewayLogger } from './options.ts';

/**
 * At most one line per upstream and message in this long: a scheduler that
 * is down or a token that is refused fails every request alike until it
 * comes back or an operator acts, and a line per request would bury the
 * log (thousands a second under load, more with retries over replicas).
 */
export const THROTTLED_LOG_INTERVAL_MS = 10_000;
/** Upstream and message pairs remembered (runtime URLs in direct mode come and go); past it the memory starts over. */
const KEYS_MAX = 1024;

/**
 * Logs trouble with an upstream: the first line for an upstream and message
 * at once, later ones at most once per THROTTLED_LOG_INTERVAL_MS, with how
 * many were held back meanwhile (`unlogged`) and the latest fields.
 */
export class ThrottledLog {
  readonly #logger: GatewayLogger;
  readonly #clock: Clock;
  readonly #seen = new Map<string, { loggedAt: number; unlogged: number }>();

  constructor(logger: GatewayLogger, clock: Clock) {
    this.#logger = logger;
    this.#clock = clock;
  }

  warn(upstream: string, message: string, fields: object = {}): void {
    this.#log('warn', upstream, message, fields);
  }

  error(upstream: string, message: string, fields: object = {}): void {
    this.#log('error', upstream, message, fields);
  }

  /**
   * An upstream back: throttled as its trouble is, since one that flaps comes
   * back as often. Also what clients can make happen on every request (a
   * session a runtime does not know), which an operator wants to hear of, not
   * once per request.
   */
  info(upstream: string, message: string, fields: object = {}): void {
    this.#log('info', upstream, message, fields);
  }

  #log(level: 'info' | 'warn' | 'error', upstream: string, message: string, fields: object): void {
    const key = `${upstream}\n${message}`;
    const now = this.#clock.now();
    const seen = this.#seen.get(key);
    if (seen && now - seen.loggedAt < THROTTLED_LOG_INTERVAL_MS) {
      seen.unlogged++;
      return;
    }
    if (!seen && this.#seen.size >= KEYS_MAX) this.#seen.clear();
    this.#logger[level]({ upstream, ...fields, ...(seen?.unlogged ? { unlogged: seen.unlogged } : {}) }, message);
    this.#seen.set(key, { loggedAt: now, unlogged: 0 });
  }
}
