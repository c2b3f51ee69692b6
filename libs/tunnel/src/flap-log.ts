import { Throttle, type Clock } from '@switchyard/clock';
import type { TunnelLogger } from './defaults.ts';

/**
 * While a runtime's tunnel flaps (FLAPS_LOGGED in a row went down before
 * they proved good), at most one connect-and-disconnect pair is logged per
 * this long. At the dialer's maximum backoff (30 s) that is about every
 * tenth tunnel, as for a scheduler it cannot reach; the line says how many
 * went unlogged.
 */
export const FLAP_LOG_INTERVAL_MS = 5 * 60_000;

/**
 * Tunnels in a row that go down before proving good, logged in full, before
 * the rest are held back. One early loss is no flapping (a replica restarted
 * right after the runtime joined it): the redial's line is wanted at once.
 * Three come within about 2 s at the default backoff.
 */
export const FLAPS_LOGGED = 3;

/**
 * Pings of its own an end of a tunnel sees answered before it counts the
 * tunnel as good: its runtime's flapping is over, and the runtime's backoff
 * starts over. Two take two ping intervals (10 s by default). A proxy that
 * drops the connection after the upgrade, or a scheduler that takes the
 * tunnel and then drops it, closes it before the first ping or within the
 * first interval; a tunnel that carried pings past the second interval was
 * up, and its loss is news. One ping alone would count a peer that drops the
 * tunnel, or goes silent, a few seconds in as good. The runtime's dialer and
 * the scheduler's `TunnelLog` both count to this, each its own pings, so both
 * ends judge a tunnel alike.
 */
export const GOOD_AFTER_PINGS = 2;

const FLAP = 'flap';

/** How a tunnel that went down ended, for its line. */
export interface DownFacts {
  /** It had proved good (answered its pings for a while); else a flap. */
  readonly good: boolean;
  /** Its `tunnel connected` line was logged when it came up. */
  readonly said: boolean;
  /** The dialer was closed: the runtime is stopping. */
  readonly closed: boolean;
}

/**
 * The dialer's `tunnel connected` and `tunnel disconnected` lines. A tunnel
 * that a proxy or scheduler drops right after the upgrade would otherwise
 * log two lines per redial for as long as it goes on. A held-back connect
 * is logged once that tunnel proves good, so the last line always tells
 * whether the runtime is connected.
 */
export class FlapLog {
  readonly #logger: TunnelLogger;
  readonly #throttle: Throttle;
  /** Tunnels in a row that went down before proving good. */
  #flaps = 0;

  constructor(logger: TunnelLogger, clock: Clock) {
    this.#logger = logger;
    this.#throttle = new Throttle(clock, FLAP_LOG_INTERVAL_MS, 1);
  }

  /** A tunnel is up. Answers whether that was logged (not while flapping, within the interval of the last pair). */
  connected(fields: object): boolean {
    const unlogged = this.#flaps >= FLAPS_LOGGED ? this.#throttle.pass(FLAP) : 0;
    if (unlogged === undefined) return false;
    this.#logger.info({ ...fields, ...(unlogged ? { unlogged } : {}) }, 'tunnel connected');
    return true;
  }

  /** The tunnel proved good: flapping is over, and a connect held back is logged now. */
  good(fields: object, said: boolean): void {
    if (this.#flaps === 0) return;
    this.#flaps = 0;
    // The tunnels held back, this one among them unless it was logged.
    const held = this.#throttle.flush()[0]?.[1] ?? 0;
    if (said) return;
    this.#logger.info({ ...fields, ...(held > 1 ? { unlogged: held - 1 } : {}) }, 'tunnel connected');
  }

  disconnected(fields: object, down: DownFacts): void {
    // A close asked for (the runtime stopping) is no trouble to warn of, whichever end noticed first.
    if (down.closed) return this.#logger.info(fields, 'tunnel closed');
    // The last flap logged in full starts the interval: the next pair is logged once it has passed.
    if (!down.good && ++this.#flaps === FLAPS_LOGGED) this.#throttle.pass(FLAP);
    // A good tunnel's connect was logged, at the latest when it proved good.
    if (down.good || down.said) this.#logger.warn(fields, 'tunnel disconnected');
  }
}
