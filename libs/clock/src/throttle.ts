import type { Clock } from './index.ts';

/**
 * Lets the first event of each key through at once, then at most one per
 * `intervalMs`, counting those it holds back. For log lines that trouble
 * repeats (an upstream down, a flood of refused connects): one line per
 * key and interval, saying how many it stands for. At most `keysMax` keys
 * are remembered; past that the key that passed longest ago is forgotten
 * (its next event passes at once): a flood of new keys (peers, upstream
 * addresses) cannot grow the memory, nor unmute the keys that passed lately.
 */
export class Throttle {
  readonly #clock: Clock;
  readonly #intervalMs: number;
  readonly #keysMax: number;
  readonly #seen = new Map<string, { passedAt: number; held: number }>();

  constructor(clock: Clock, intervalMs: number, keysMax = 1024) {
    this.#clock = clock;
    this.#intervalMs = intervalMs;
    this.#keysMax = keysMax;
  }

  /** When this event of `key` may pass, how many were held back since the last that did; else undefined. */
  pass(key: string): number | undefined {
    const now = this.#clock.monotonicNow();
    const seen = this.#seen.get(key);
    if (seen && now - seen.passedAt < this.#intervalMs) {
      seen.held++;
      return undefined;
    }
    // Set anew, the key moves to the end: the map's first key is the one that passed longest ago.
    this.#seen.delete(key);
    if (this.#seen.size >= this.#keysMax) this.#seen.delete(this.#seen.keys().next().value!);
    this.#seen.set(key, { passedAt: now, held: 0 });
    return seen?.held ?? 0;
  }

  /** Forgets every key (the next event of each passes), answering those that had events held back, and how many. */
  flush(): [key: string, held: number][] {
    const held = [...this.#seen].filter(([, s]) => s.held > 0).map(([key, s]): [string, number] => [key, s.held]);
    this.#seen.clear();
    return held;
  }
}
