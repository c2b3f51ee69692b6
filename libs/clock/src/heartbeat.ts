import type { Clock, Timer } from './index.ts';

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
 * A timeout timer late by more than this share of the timeout means this
 * process stood still (a blocked event loop, a long GC pause, a starved CPU)
 * for a good part of the peer's window. Node runs due timers before it reads
 * sockets, so an answer that came meanwhile is still unread: the verdict is
 * put off by one more timeout rather than blaming the peer for our pause.
 */
const PAUSE_SHARE_MAX = 0.25;
/** Times one probe's verdict may be put off so; a process that keeps standing still still convicts. */
const PUT_OFFS_MAX = 3;

/**
 * Probes a peer every `intervalMs` and declares it dead when a probe fails or
 * is unanswered after `timeoutMs`. At most one probe is outstanding, so a
 * frozen peer is detected within `intervalMs + timeoutMs` while this process
 * runs; an answer that came by the timeout, read in the event-loop turn after
 * it, counts. When this process stood still itself past the timeout (see
 * PAUSE_SHARE_MAX), the peer gets one timeout more from its return, at most
 * PUT_OFFS_MAX times a probe: detection then takes up to `intervalMs + 4 ×
 * timeoutMs` plus the pauses. Runs on an injected clock so the state machine
 * is tested without sleeping.
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
    this.#awaitAnswer(current, PUT_OFFS_MAX);
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

  /** Gives the probe `timeoutMs` from now, and more when its timer fires late (see PAUSE_SHARE_MAX). */
  #awaitAnswer(current: () => boolean, putOffsLeft: number): void {
    const { clock, timeoutMs } = this.#o;
    const dueAt = clock.monotonicNow() + timeoutMs;
    this.#timer = clock.setTimeout(() => {
      if (!current()) return;
      const paused = clock.monotonicNow() - dueAt > timeoutMs * PAUSE_SHARE_MAX;
      if (paused && putOffsLeft > 0) return this.#awaitAnswer(current, putOffsLeft - 1);
      // Node runs due timers before it reads sockets: an answer that came by now is read before this next timer.
      this.#timer = clock.setTimeout(() => {
        if (current()) this.#die(`no ping answer within ${timeoutMs} ms`, 'unanswered');
      }, 0);
    }, timeoutMs);
  }

  #die(reason: string, cause: 'unanswered' | 'failed'): void {
    this.stop();
    this.#o.onDead(reason, cause);
  }
}
