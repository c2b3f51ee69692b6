import type { Runtime } from '@switchyard/protocol';
import type { Candidate, RuntimeEntry } from './candidate.ts';

/**
 * The open members of a candidate list (available, idle weight in every
 * dimension), in the same id order, with their `weight`s packed alongside.
 * The pipeline hands it to the stages as a hint so the common request (a
 * new process, no exclusions) scans packed numbers instead of objects.
 * A new view object is made after every change, so anything memoised per
 * view expires with the snapshot it was computed from.
 */
export interface OpenView {
  /** The candidate list this view was computed from (identity, not content). */
  readonly of: readonly Candidate[];
  readonly entries: readonly Candidate[];
  readonly weights: readonly number[];
}

/** Position of `id` in an id-sorted list, or where it would be inserted. */
function search(list: readonly RuntimeEntry[], id: string): number {
  let lo = 0;
  let hi = list.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (list[mid]!.id < id) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/**
 * Entries kept sorted by id, with a parallel array of their records (so the
 * index hands out `readonly Runtime[]` without sorting or copying per call)
 * and, once asked for, the open subset maintained incrementally: a weight
 * change costs O(log n), a runtime opening or closing one splice.
 */
export class SortedRuntimes {
  readonly entries: RuntimeEntry[] = [];
  readonly runtimes: Runtime[] = [];
  #open: { entries: RuntimeEntry[]; weights: number[] } | undefined;
  #view: OpenView | undefined;

  open(): OpenView {
    if (this.#view !== undefined) return this.#view;
    if (this.#open === undefined) {
      const entries = this.entries.filter((e) => e.open);
      this.#open = { entries, weights: entries.map((e) => e.weight) };
    }
    return (this.#view = { of: this.entries, entries: this.#open.entries, weights: this.#open.weights });
  }

  insert(entry: RuntimeEntry): void {
    const at = search(this.entries, entry.id);
    if (this.entries[at]?.id === entry.id) {
      this.entries[at] = entry;
      return this.refresh(entry);
    }
    this.#view = undefined;
    this.entries.splice(at, 0, entry);
    this.runtimes.splice(at, 0, entry.runtime);
    this.#track(entry);
  }

  remove(id: string): void {
    const at = search(this.entries, id);
    if (this.entries[at]?.id !== id) return;
    this.#view = undefined;
    this.entries.splice(at, 1);
    this.runtimes.splice(at, 1);
    const open = this.#open;
    if (open === undefined) return;
    const pos = search(open.entries, id);
    if (open.entries[pos]?.id !== id) return;
    open.entries.splice(pos, 1);
    open.weights.splice(pos, 1);
  }

  /** Re-reads the record of an entry already present (after its runtime changed). */
  refresh(entry: RuntimeEntry): void {
    const at = search(this.entries, entry.id);
    if (this.entries[at]?.id !== entry.id) return;
    this.#view = undefined;
    this.runtimes[at] = entry.runtime;
    this.#track(entry);
  }

  get size(): number {
    return this.entries.length;
  }

  /** Brings the open subset in line with `entry`'s current state. */
  #track(entry: RuntimeEntry): void {
    const open = this.#open;
    if (open === undefined) return;
    const pos = search(open.entries, entry.id);
    const listed = open.entries[pos]?.id === entry.id;
    if (listed && entry.open) {
      open.entries[pos] = entry;
      open.weights[pos] = entry.weight;
    } else if (listed) {
      open.entries.splice(pos, 1);
      open.weights.splice(pos, 1);
    } else if (entry.open) {
      open.entries.splice(pos, 0, entry);
      open.weights.splice(pos, 0, entry.weight);
    }
  }
}
