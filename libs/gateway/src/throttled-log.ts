import { Throttle, type Clock } from '@switchyard/clock';
import type { GatewayLogger } from './options.ts';

/**
 * At most one line per upstream and message in this long: a scheduler that
 * is down or a token that is refused fails every request alike until it
 * comes back or an operator acts, and a line per request would bury the
 * log (thousands a second under load, more with retries over replicas).
 */
export const THROTTLED_LOG_INTERVAL_MS = 10_000;
/** Upstream and message pairs remembered (runtime URLs in direct mode come and go); past it the oldest is dropped. */
const KEYS_MAX = 1024;

/**
 * Logs trouble with an upstream: the first line for an upstream and message
 * at once, later ones at most once per THROTTLED_LOG_INTERVAL_MS, with how
 * many were held back meanwhile (`unlogged`) and the latest fields.
 */
export class ThrottledLog {
  readonly #logger: GatewayLogger;
  readonly #throttle: Throttle;

  constructor(logger: GatewayLogger, clock: Clock) {
    this.#logger = logger;
    this.#throttle = new Throttle(clock, THROTTLED_LOG_INTERVAL_MS, KEYS_MAX);
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
    const unlogged = this.#throttle.pass(`${upstream}\n${message}`);
    if (unlogged === undefined) return;
    this.#logger[level]({ upstream, ...fields, ...(unlogged ? { unlogged } : {}) }, message);
  }
}
