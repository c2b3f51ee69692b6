import type { Clock, Timer } from '@switchyard/clock';

export interface HeartbeatOptions {
  readonly clock: Clock;
  readonly intervalMs: number;
  readonly timeoutMs: number;
  /** Sends one round of probes; resolves with the round-trip time in ms, rejects on failure. */
  readonly probe: () => Promise<number>;
  readonly onRtt: (rttMs: number) => void;
  /** `unanswered`: the peer went silent (a probe timed out), rather than failed a probe. */
  readonly onDead: (reason: string, cause: 'unanswered' | 'failed') => void;
}

/**
 * Probes a peer every `intervalMs` and declares it dead when a probe fails or
 * is unanswered after `timeoutMs`. At most one probe is outstanding, so a
 * frozen peer is detected within `intervalMs + timeoutMs`. Runs on an injected
 * clock so the state machine is tested without sleeping.
 */
export class Heartbeat {
  readonly #o: HeartbeatOptions;
  #timer: Timer | undefined;
  #stopped = false;
  #round = 0;

  constructor(options: HeartbeatOptions) {
    this.#o = options;
    this.#schedule();
  }

  stop(): void {
    this.#stopped = true;
    this.#timer?.cancel();
    this.#timer = undefined;
  }

  #schedule(): void {
    if (this.#stopped) return;
    this.#timer = this.#o.clock.setTimeout(() => this.#tick(), this.#o.intervalMs);
  }

  #tick(): void {
    if (this.#stopped) return;
    const round = ++this.#round;
    // A stale answer (from a round that already timed out) must not revive the peer.
    const current = (): boolean => !this.#stopped && round === this.#round;
    this.#timer = this.#o.clock.setTimeout(() => {
      if (current()) this.#die(`no ping answer within ${this.#o.timeoutMs} ms`, 'unanswered');
    }, this.#o.timeoutMs);
    this.#o.probe().then(
      (rttMs) => {
        if (!current()) return;
        this.#timer?.cancel();
        this.#o.onRtt(rttMs);
        this.#schedule();
      },
      (error: unknown) => {
        if (current()) this.#die(`ping failed: ${error instanceof Error ? error.message : String(error)}`, 'failed');
      },
    );
  }

  #die(reason: string, cause: 'unanswered' | 'failed'): void {
    this.stop();
    this.#o.onDead(reason, cause);
  }
}
