import type { Clock, Timer } from './index.ts';

interface Pending {
  readonly at: number;
  readonly seq: number;
  readonly fn: () => void;
  cancelled: boolean;
}

/**
 * A clock that moves only when told. Timers fire in due order (ties in
 * creation order) as `advance` passes them; microtasks queued by a timer run
 * before the next timer fires, so promise chains behave as with real time.
 * Both readings start at `startMs` and move together, until `stepWall`
 * moves the wall clock alone, as NTP does.
 */
export class ManualClock implements Clock {
  /** The monotonic reading; timers are due on it, as Node's are. */
  #now: number;
  #wallOffsetMs = 0;
  #seq = 0;
  #pending: Pending[] = [];

  constructor(startMs = 1_700_000_000_000) {
    this.#now = startMs;
  }

  now(): number {
    return this.#now + this.#wallOffsetMs;
  }

  monotonicNow(): number {
    return this.#now;
  }

  /** Steps the wall clock by `ms` (negative: back), as NTP or an operator would; monotonic time and timers stay. */
  stepWall(ms: number): void {
    this.#wallOffsetMs += ms;
  }

  /**
   * The process stands still for `ms` (a blocked event loop, a GC pause, a
   * starved CPU): both readings move on, but no timer fires. Those that fell
   * due meanwhile fire at the next `advance`, late and in due order, before
   * anything else that advance lets run, as Node runs its timers first when
   * its loop comes back.
   */
  standStill(ms: number): void {
    this.#now += ms;
  }

  setTimeout(fn: () => void, delayMs: number): Timer {
    const entry: Pending = { at: this.#now + Math.max(0, delayMs), seq: this.#seq++, fn, cancelled: false };
    this.#pending.push(entry);
    return { cancel: () => void (entry.cancelled = true) };
  }

  /** Number of timers not yet fired or cancelled. */
  get pendingTimers(): number {
    return this.#pending.filter((p) => !p.cancelled).length;
  }

  /**
   * How long until the next timer falls due (0 for one overdue), undefined
   * with none pending: `advance(nextDueInMs)` fires that timer alone (and
   * any due with it), for a test that must let I/O run between two timers.
   */
  get nextDueInMs(): number | undefined {
    const next = this.#nextDue(Infinity);
    return next && Math.max(0, next.at - this.#now);
  }

  /** Moves time forward by `ms`, firing every timer that falls due on the way. */
  async advance(ms: number): Promise<void> {
    const target = this.#now + ms;
    for (;;) {
      await flushMicrotasks();
      const next = this.#nextDue(target);
      if (!next) break;
      this.#pending.splice(this.#pending.indexOf(next), 1);
      // A timer overdue after standStill fires now, late; time never goes back.
      this.#now = Math.max(this.#now, next.at);
      next.fn();
    }
    this.#now = target;
    await flushMicrotasks();
  }

  #nextDue(limit: number): Pending | undefined {
    this.#pending = this.#pending.filter((p) => !p.cancelled);
    let best: Pending | undefined;
    for (const p of this.#pending) {
      if (p.at > limit) continue;
      if (!best || p.at < best.at || (p.at === best.at && p.seq < best.seq)) best = p;
    }
    return best;
  }
}

/** Lets every queued promise continuation run (several turns, for chains). */
export async function flushMicrotasks(turns = 20): Promise<void> {
  for (let i = 0; i < turns; i++) await Promise.resolve();
}
