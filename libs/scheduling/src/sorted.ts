import type { Runtime } from '@switchyard/protocol';
import type { Candidate, RuntimeEntry } from './candidate.ts';

/**
 * The open members of a candidate list (available, idle weight in every
 * dimension), in the same id order, with their `weight`s in a typed array.
 * The pipeline hands it to the filters as a hint so the common request (a
 * new process, no exclusions) scans packed numbers instead of objects.
 */
export interface OpenView {
  /** The candidate list this view was computed from (identity, not content). */
  readonly of: readonly Candidate[];
  readonly entries: readonly Candidate[];
  readonly weights: Float64Array;
}

/**
 * Entries kept sorted by id, with a parallel array of their records, so the
 * index can hand out `readonly Runtime[]` and `readonly RuntimeEntry[]`
 * without sorting or copying per call. Updates cost O(n) (splice), which is
 * paid per runtime change, not per decision.
 */
export class SortedRuntimes {
  readonly entries: RuntimeEntry[] = [];
  readonly runtimes: Runtime[] = [];
  #open: OpenView | undefined;

  /** The open subset, rebuilt on first use after any change (so once per batch of deltas). */
  open(): OpenView {
    if (this.#open !== undefined) return this.#open;
    const entries = this.entries.filter((e) => e.open);
    const weights = new Float64Array(entries.length);
    for (let i = 0; i < entries.length; i++) weights[i] = entries[i]!.weight;
    return (this.#open = { of: this.entries, entries, weights });
  }

  #find(id: string): number {
    let lo = 0;
    let hi = this.entries.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (this.entries[mid]!.id < id) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }

  insert(entry: RuntimeEntry): void {
    this.#open = undefined;
    const at = this.#find(entry.id);
    if (this.entries[at]?.id === entry.id) {
      this.entries[at] = entry;
      this.runtimes[at] = entry.runtime;
      return;
    }
    this.entries.splice(at, 0, entry);
    this.runtimes.splice(at, 0, entry.runtime);
  }

  remove(id: string): void {
    this.#open = undefined;
    const at = this.#find(id);
    if (this.entries[at]?.id !== id) return;
    this.entries.splice(at, 1);
    this.runtimes.splice(at, 1);
  }

  /** Re-reads the record of an entry already present (after its runtime changed). */
  refresh(entry: RuntimeEntry): void {
    this.#open = undefined;
    const at = this.#find(entry.id);
    if (this.entries[at]?.id === entry.id) this.runtimes[at] = entry.runtime;
  }

  get size(): number {
    return this.entries.length;
  }
}
