import type { Runtime } from '@switchyard/protocol';
import type { RuntimeEntry } from './candidate.ts';

/**
 * Entries kept sorted by id, with a parallel array of their records, so the
 * index can hand out `readonly Runtime[]` and `readonly RuntimeEntry[]`
 * without sorting or copying per call. Updates cost O(n) (splice), which is
 * paid per runtime change, not per decision.
 */
export class SortedRuntimes {
  readonly entries: RuntimeEntry[] = [];
  readonly runtimes: Runtime[] = [];

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
    const at = this.#find(id);
    if (this.entries[at]?.id !== id) return;
    this.entries.splice(at, 1);
    this.runtimes.splice(at, 1);
  }

  /** Re-reads the record of an entry already present (after its runtime changed). */
  refresh(entry: RuntimeEntry): void {
    const at = this.#find(entry.id);
    if (this.entries[at]?.id === entry.id) this.runtimes[at] = entry.runtime;
  }

  get size(): number {
    return this.entries.length;
  }
}
