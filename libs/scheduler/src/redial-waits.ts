import type { Clock, Timer } from '@switchyard/clock';
import { BACKOFF_DEFAULTS, type Tunnel } from '@switchyard/tunnel';
import type { ReplicaLogger } from './options.ts';

/**
 * How long a request for a runtime whose tunnel was lost here (the
 * connection broke) waits for it to come back, rather than be refused as
 * for a runtime gone; see `RedialWaits`. A runtime that lives redials at
 * once, 200-250 ms into its backoff, and a redial to another replica shows
 * in an epoch about 0.1 s later; a session of a runtime that died must
 * still hear so (404) well within a second of its tunnel closing. A tunnel
 * that went silent, or ran over a slow link, is waited for longer.
 */
export const REDIAL_WAIT_MS = 600;

/**
 * Round trips from a runtime's redial until the replica holds its new
 * tunnel, with one to spare: TCP's handshake, TLS 1.3's, and the upgrade
 * request (the replica takes the tunnel as it answers it).
 */
const REDIAL_ROUND_TRIPS = 4;

/** A tunnel's round trip is counted up to this. */
const REDIAL_RTT_COUNTED_MAX_MS = 1000;

/**
 * The wait for a runtime whose connection broke: REDIAL_WAIT_MS, or over a
 * link slow enough that the redial's round trips outlast what that leaves
 * after the runtime's first backoff delay (about 90 ms each), as long as
 * those take at the tunnel's least ping round trip (the link's own delay:
 * a busy replica's pings may each have waited for it).
 */
function redialWaitMs(rttMs: number | undefined): number {
  const rtt = Math.min(rttMs ?? 0, REDIAL_RTT_COUNTED_MAX_MS);
  return Math.max(REDIAL_WAIT_MS, BACKOFF_DEFAULTS.initialMs + REDIAL_ROUND_TRIPS * rtt);
}

/** How the wait for a lost runtime ended: back here, shown behind another replica, or over without it. */
export type RedialOutcome = 'back' | 'moved' | 'gone';

/** A runtime whose tunnel was lost here lately, and the requests waiting for it. */
interface Wait {
  readonly waiters: Set<() => void>;
  readonly timer: Timer;
  /** The lost tunnel's: a connection of the runtime that an epoch shows elsewhere is its new one if newer. */
  readonly generation: number;
}

/**
 * Requests held for runtimes whose tunnels were lost here (they ended
 * without a GOAWAY: the connection broke or went silent), until each
 * runtime is back, shows elsewhere, or its wait is over; then they go on
 * and find it here, forward it, or are refused.
 */
export class RedialWaits {
  readonly #waits = new Map<string, Wait>();
  readonly #clock: Clock;
  readonly #logger: ReplicaLogger;
  readonly #onEnded: ((outcome: RedialOutcome) => void) | undefined;

  constructor(clock: Clock, logger: ReplicaLogger, onEnded?: (outcome: RedialOutcome) => void) {
    this.#clock = clock;
    this.#logger = logger;
    this.#onEnded = onEnded;
  }

  /**
   * Starts waiting for the runtime of a lost tunnel (`redialWaitMs`),
   * counted from when it knows to: at once for a connection that broke
   * (both ends see that), but for one that went silent only once the
   * runtime's own pings have found it dead too, which its announced timing
   * bounds (`Tunnel.peerNoticesBy`).
   */
  start(tunnel: Tunnel): void {
    const { runtimeId, peerNoticesBy, generation } = tunnel;
    this.end(runtimeId);
    const now = this.#clock.monotonicNow();
    const waitMs = Math.max(0, (peerNoticesBy ?? now) - now) + redialWaitMs(tunnel.minRttMs);
    // A runtime whose tunnels flap (their lines held back, see Tunnel.quiet) would say this at every flap.
    const quiet = tunnel.quiet;
    const timer = this.#clock.setTimeout(() => {
      this.#logger[quiet ? 'debug' : 'warn'](
        { runtime: runtimeId, waitedMs: waitMs },
        'lost runtime not back: its requests are refused',
      );
      this.end(runtimeId, 'gone');
    }, waitMs);
    this.#waits.set(runtimeId, { waiters: new Set(), timer, generation });
    this.#logger[quiet ? 'debug' : 'info'](
      { runtime: runtimeId, waitMs },
      'holding requests for a lost runtime until it redials',
    );
  }

  /** Runs `proceed` now, or, while the runtime is waited for, once the wait ends. */
  after(runtimeId: string, proceed: () => void): void {
    const wait = this.#waits.get(runtimeId);
    if (wait) wait.waiters.add(proceed);
    else proceed();
  }

  /** The runtimes waited for, each with its lost tunnel's generation. */
  *pending(): IterableIterator<[runtimeId: string, generation: number]> {
    for (const [runtimeId, wait] of this.#waits) yield [runtimeId, wait.generation];
  }

  /** Ends the wait for a runtime (if any): its requests go on. Counted when `outcome` says how it ended. */
  end(runtimeId: string, outcome?: RedialOutcome): void {
    const wait = this.#waits.get(runtimeId);
    if (!wait) return;
    this.#waits.delete(runtimeId);
    wait.timer.cancel();
    if (outcome) this.#onEnded?.(outcome);
    for (const proceed of wait.waiters) proceed();
  }

  /** Ends every wait, uncounted (the replica is closing). */
  close(): void {
    for (const runtimeId of [...this.#waits.keys()]) this.end(runtimeId);
  }
}
