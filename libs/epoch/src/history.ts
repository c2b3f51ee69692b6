import type { RuntimeState } from '@switchyard/protocol';
import { checkInt } from './options.ts';
import type { EpochRef } from './types.ts';

/**
 * The last `keep` epochs' states, oldest evicted first. Epochs are recorded
 * in increasing order; recording an epoch at or below the newest (a new
 * leader's snapshot) starts the history over, so lookups never mix terms,
 * except the newest again from its own term, which replaces only itself.
 */
export class EpochHistory {
  readonly #keep: number;
  readonly #states = new Map<number, readonly RuntimeState[]>();
  #latest: EpochRef | undefined;

  constructor(keep: number) {
    this.#keep = checkInt('keepEpochs', keep, 1);
  }

  record(ref: EpochRef, states: readonly RuntimeState[]): void {
    const latest = this.#latest;
    // The latest epoch again from its own term (a snapshot after a reconnect) is the same state: keep the rest.
    const repeat = latest !== undefined && ref.epoch === latest.epoch && ref.term === latest.term;
    if (latest && ref.epoch <= latest.epoch && !repeat) this.#states.clear();
    this.#states.set(ref.epoch, states);
    this.#latest = { epoch: ref.epoch, term: ref.term };
    while (this.#states.size > this.#keep) {
      const oldest = this.#states.keys().next().value as number;
      this.#states.delete(oldest);
    }
  }

  latest(): EpochRef | undefined {
    return this.#latest;
  }

  latestStates(): readonly RuntimeState[] | undefined {
    return this.#latest ? this.#states.get(this.#latest.epoch) : undefined;
  }

  /** A copy of the kept state of `epoch`, so callers cannot corrupt history. */
  at(epoch: number): RuntimeState[] | undefined {
    const states = this.#states.get(epoch);
    return states ? (structuredClone(states) as RuntimeState[]) : undefined;
  }
}
