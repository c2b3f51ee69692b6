import type { Candidate } from './candidate.ts';
import type { OpenView } from './sorted.ts';

/** `weight` = the smallest idle-weight dimension; any other name = that dimension, 0 when absent. */
export function weightBy(candidate: Candidate, key: string): number {
  if (key === 'weight') return candidate.weight;
  const dims = candidate.runtime.idleWeight;
  return Object.hasOwn(dims, key) ? dims[key]! : 0;
}

// Rankings of an open view per (sortBy, replicasLimit); dropped with the view.
const RANKED = new WeakMap<OpenView, Map<string, readonly Candidate[]>>();
const RANKED_PER_VIEW_MAX = 32;

/** True when (keyA, a) ranks after (keyB, b): keys are pre-signed so smaller ranks first. */
function worse(keyA: number, a: Candidate, keyB: number, b: Candidate): boolean {
  return keyA > keyB || (keyA === keyB && a.id > b.id);
}

/**
 * The best `limit` of `candidates` by key then id, as a bounded max-heap of
 * the worst kept entry: one comparison per candidate in the common case and
 * O(n·log limit) at worst, instead of sorting all n.
 */
function bestOf(candidates: readonly Candidate[], key: string, sign: number, limit: number): Candidate[] {
  const heap: Candidate[] = [];
  const keys: number[] = [];
  const siftDown = (from: number): void => {
    let at = from;
    for (;;) {
      const left = 2 * at + 1;
      if (left >= heap.length) return;
      const right = left + 1;
      const child = right < heap.length && worse(keys[right]!, heap[right]!, keys[left]!, heap[left]!) ? right : left;
      if (!worse(keys[child]!, heap[child]!, keys[at]!, heap[at]!)) return;
      [heap[at], heap[child]] = [heap[child]!, heap[at]!];
      [keys[at], keys[child]] = [keys[child]!, keys[at]!];
      at = child;
    }
  };
  for (const candidate of candidates) {
    const k = sign * weightBy(candidate, key);
    if (heap.length < limit) {
      let at = heap.length;
      heap.push(candidate);
      keys.push(k);
      while (at > 0) {
        const parent = (at - 1) >> 1;
        if (!worse(keys[at]!, heap[at]!, keys[parent]!, heap[parent]!)) break;
        [heap[at], heap[parent]] = [heap[parent]!, heap[at]!];
        [keys[at], keys[parent]] = [keys[parent]!, keys[at]!];
        at = parent;
      }
    } else if (limit > 0 && worse(keys[0]!, heap[0]!, k, candidate)) {
      heap[0] = candidate;
      keys[0] = k;
      siftDown(0);
    }
  }
  const order = heap.map((_, i) => i).sort((i, j) => (worse(keys[i]!, heap[i]!, keys[j]!, heap[j]!) ? 1 : -1));
  return order.map((i) => heap[i]!);
}

/**
 * `bestOf` for id-sorted entries whose keys are already packed in an array:
 * scans numbers, touches an entry only when it enters the heap, and breaks
 * ties by position (= by id, as the entries are sorted by id).
 */
function bestOfPacked(
  entries: readonly Candidate[],
  weights: readonly number[],
  sign: number,
  limit: number,
): Candidate[] {
  const heap: number[] = []; // positions into entries; the worst kept one at the root
  const after = (i: number, j: number): boolean => {
    const ki = sign * weights[i]!;
    const kj = sign * weights[j]!;
    return ki > kj || (ki === kj && i > j);
  };
  const siftDown = (): void => {
    let at = 0;
    for (;;) {
      const left = 2 * at + 1;
      if (left >= heap.length) return;
      const right = left + 1;
      const child = right < heap.length && after(heap[right]!, heap[left]!) ? right : left;
      if (!after(heap[child]!, heap[at]!)) return;
      [heap[at], heap[child]] = [heap[child]!, heap[at]!];
      at = child;
    }
  };
  const fill = Math.min(limit, weights.length);
  for (let i = 0; i < fill; i++) {
    heap.push(i);
    for (let at = heap.length - 1; at > 0;) {
      const parent = (at - 1) >> 1;
      if (!after(heap[at]!, heap[parent]!)) break;
      [heap[at], heap[parent]] = [heap[parent]!, heap[at]!];
      at = parent;
    }
  }
  let worst = fill > 0 ? sign * weights[heap[0]!]! : 0;
  for (let i = fill; i < weights.length; i++) {
    // Strictly better only: an equal key at a later position has a higher id.
    if (sign * weights[i]! < worst) {
      heap[0] = i;
      siftDown();
      worst = sign * weights[heap[0]!]!;
    }
  }
  return heap.sort((i, j) => (after(i, j) ? 1 : -1)).map((i) => entries[i]!);
}

/**
 * The best `limit` candidates in order: holders first, then by the `sortBy`
 * key (`-` prefix = descending), then by id.
 */
export function topCandidates(
  candidates: readonly Candidate[],
  holders: readonly string[],
  sortBy: string,
  limit: number,
  open?: OpenView,
): readonly Candidate[] {
  const descending = sortBy.startsWith('-');
  const key = descending ? sortBy.slice(1) : sortBy;
  const sign = descending ? -1 : 1;
  if (holders.length === 0 && open !== undefined && open.entries === candidates) {
    // Every new process of the class sees this same list until the snapshot
    // changes (which replaces the view), so the ranking is computed once per
    // change and settings, not once per decision.
    let memo = RANKED.get(open);
    if (memo === undefined) RANKED.set(open, (memo = new Map()));
    const memoKey = `${sortBy}\u0000${limit}`;
    let ranked = memo.get(memoKey);
    if (ranked === undefined) {
      ranked =
        key === 'weight' ? bestOfPacked(open.entries, open.weights, sign, limit) : bestOf(candidates, key, sign, limit);
      if (memo.size >= RANKED_PER_VIEW_MAX) memo.clear();
      memo.set(memoKey, Object.freeze(ranked));
    }
    return ranked;
  }
  if (holders.length === 0) return bestOf(candidates, key, sign, limit);
  const held = candidates.filter((c) => holders.includes(c.id));
  if (held.length === 0) return bestOf(candidates, key, sign, limit);
  const top = bestOf(held, key, sign, limit);
  const rest = candidates.filter((c) => !holders.includes(c.id));
  return top.concat(bestOf(rest, key, sign, limit - top.length));
}
