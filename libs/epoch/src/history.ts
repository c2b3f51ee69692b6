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

  /**
   * The kept state of `epoch`, shared rather than copied: a copy of a large fleet blocks the event loop for
   * seconds (4 s for 1,000,000 threads). Never mutate it; nothing here does once it is recorded.
   */
  at(epoch: number): readonly RuntimeState[] | undefined {
    return this.#states.get(epoch);
  }
}
