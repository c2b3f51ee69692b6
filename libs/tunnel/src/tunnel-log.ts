import type { Clock } from '@switchyard/clock';
import type { TunnelLogger } from './defaults.ts';
import { FLAP_LOG_INTERVAL_MS, FLAPS_LOGGED, GOOD_AFTER_PINGS } from './flap-log.ts';

/** One accepted tunnel's lines, from `TunnelLog.opened` to its `closed`. */
export interface TunnelLife {
  /** True while its lines are held back: its runtime flaps and it has not stayed up (see TunnelLog). */
  readonly quiet: boolean;
  /** The runtime answered one of the scheduler's pings on it. */
  answered(): void;
  /** Logs its `tunnel closed` unless held back. Once. */
  closed(reason: string): void;
}

interface Flapping {
  /** Its tunnels in a row that closed before they turned good. */
  flaps: number;
  /** When its last `tunnel open` was logged while flapping (monotonic). */
  saidAt: number;
  /** Tunnels accepted since then whose lines were held back. */
  held: number;
}

/**
 * The scheduler's `tunnel open` and `tunnel closed` lines, per runtime as
 * the runtime's own dialer keeps its lines (`FlapLog`). A tunnel is good
 * once the runtime has answered GOOD_AFTER_PINGS of the scheduler's pings on
 * it, as the dialer counts its own (a silent tunnel is never good, however
 * long its ping timeout lets it live); one that closes before it is good is
 * a flap; after FLAPS_LOGGED flaps in a row, a runtime's tunnels are logged
 * (open and close) once per FLAP_LOG_INTERVAL_MS, the open line counting
 * those held back meanwhile (`unlogged`). A tunnel held back that turns good
 * ends the flapping and logs its `tunnel open` then, so a runtime's last
 * line says whether it is connected. A runtime that flaps is held to its own
 * backoff (about one tunnel per 30 s), but one without it, or many at once,
 * would otherwise write two lines a tunnel. Runtimes remembered:
 * `runtimesMax` (past it the memory starts over; only flapping runtimes are
 * kept).
 */
export class TunnelLog {
  readonly #logger: TunnelLogger;
  readonly #clock: Clock;
  readonly #runtimesMax: number;
  readonly #flapping = new Map<string, Flapping>();

  constructor(logger: TunnelLogger, clock: Clock, runtimesMax: number) {
    this.#logger = logger;
    this.#clock = clock;
    this.#runtimesMax = runtimesMax;
  }

  /** A tunnel of `runtime` was accepted; `fields` go on both its lines. */
  opened(runtime: string, fields: object): TunnelLife {
    const openedAt = this.#clock.monotonicNow();
    const line = { runtime, ...fields };
    const unlogged = this.#pass(runtime, openedAt);
    if (unlogged !== undefined) this.#logger.info({ ...line, ...(unlogged ? { unlogged } : {}) }, 'tunnel open');
    let said = unlogged !== undefined;
    let good = false;
    let ended = false;
    let pings = 0;
    return {
      get quiet() {
        return !said;
      },
      answered: () => {
        if (ended || good || ++pings < GOOD_AFTER_PINGS) return;
        good = true;
        said = this.#good(runtime, line, said) || said;
      },
      closed: (reason) => {
        if (ended) return;
        ended = true;
        if (!good) this.#flap(runtime);
        if (said) this.#logger.info({ ...line, reason, upMs: this.#clock.monotonicNow() - openedAt }, 'tunnel closed');
      },
    };
  }

  /** Whether this runtime's open is logged now: the lines held back since the last if so, else undefined. */
  #pass(runtime: string, now: number): number | undefined {
    const f = this.#flapping.get(runtime);
    if (!f || f.flaps < FLAPS_LOGGED) return 0;
    if (now - f.saidAt < FLAP_LOG_INTERVAL_MS) {
      f.held++;
      return undefined;
    }
    const held = f.held;
    f.saidAt = now;
    f.held = 0;
    return held;
  }

  /** A tunnel stayed up: its runtime's flapping is over. Answers whether a held-back open was logged now. */
  #good(runtime: string, line: object, said: boolean): boolean {
    const f = this.#flapping.get(runtime);
    this.#flapping.delete(runtime);
    if (said) return false;
    // The tunnels held back, this one among them (none known if the memory started over meanwhile).
    const unlogged = (f?.held ?? 0) - 1;
    this.#logger.info({ ...line, ...(unlogged > 0 ? { unlogged } : {}) }, 'tunnel open');
    return true;
  }

  #flap(runtime: string): void {
    let f = this.#flapping.get(runtime);
    if (!f) {
      if (this.#flapping.size >= this.#runtimesMax) this.#flapping.clear();
      f = { flaps: 0, saidAt: 0, held: 0 };
      this.#flapping.set(runtime, f);
    }
    // The last flap logged in full starts the interval: the next open is logged once it has passed.
    if (++f.flaps === FLAPS_LOGGED) f.saidAt = this.#clock.monotonicNow();
  }
}
