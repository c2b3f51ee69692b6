import type { ClusterOp, Runtime, RuntimeState, ThreadRef } from '@switchyard/protocol';
import { canonicalRuntime, compareIds, compareThreads, preferState, sameIdentity, sameRecord } from './canonical.ts';

/**
 * Merges the parts reported by every replica into one canonical snapshot.
 *
 * Guarantees: the result does not depend on the order of the parts or of
 * their runtimes. A runtime reported by several replicas resolves to the
 * report with the higher `generation`, then the lexicographically higher
 * `owner`; the losing reports contribute nothing (no union of processes).
 * Output as `ClusterIndex.toStates()`: runtimes by id, lists sorted.
 *
 * Cost follows the states not seen before: canonical forms are remembered
 * by input object, so input states must not be mutated once passed (epoch
 * parts never are), and output states must not be mutated either.
 */
export function mergeParts(parts: ReadonlyArray<readonly RuntimeState[]>): RuntimeState[] {
  const chosen = new Map<string, RuntimeState>();
  for (const part of parts) {
    for (const state of part) {
      const seen = chosen.get(state.runtime.id);
      chosen.set(state.runtime.id, seen === undefined ? state : preferState(seen, state));
    }
  }
  const out: RuntimeState[] = [];
  for (const id of [...chosen.keys()].sort(compareIds)) out.push(canonicalState(chosen.get(id)!));
  return out;
}

/**
 * Canonical forms already made, by input state. Replicas hand the merge the
 * same unchanged state objects every epoch (parts are immutable), so a
 * merge costs the runtimes that changed, not every thread of the fleet.
 */
const canonicalStates = new WeakMap<RuntimeState, RuntimeState>();

/** A state with its runtime record canonical and its lists sorted, unique and covering (as `toStates`). */
function canonicalState(state: RuntimeState): RuntimeState {
  let out = canonicalStates.get(state);
  if (out === undefined) {
    out = { runtime: canonicalRuntime(state.runtime), ...sortedContent(state) };
    canonicalStates.set(state, out);
  }
  return out;
}

/** State by runtime id; a duplicate id keeps the last. */
function byId(states: readonly RuntimeState[]): Map<string, RuntimeState> {
  const out = new Map<string, RuntimeState>();
  for (const state of states) out.set(state.runtime.id, state);
  return out;
}

function recordOps(prev: Runtime, next: Runtime): ClusterOp[] {
  const runtimeId = next.id;
  if (!sameIdentity(prev, next)) return [{ op: 'runtime.upsert', runtime: next }];
  const ops: ClusterOp[] = [];
  if (prev.available !== next.available) ops.push({ op: 'runtime.available', runtimeId, available: next.available });
  if (!sameRecord(prev.idleWeight, next.idleWeight)) ops.push({ op: 'weight', runtimeId, idleWeight: next.idleWeight });
  if (!sameRecord(prev.metadata, next.metadata)) ops.push({ op: 'metadata', runtimeId, metadata: next.metadata });
  return ops;
}

/** Element-wise equality of the lists: the common case of an untouched runtime, without allocating. */
function sameContent(prev: RuntimeState, next: RuntimeState): boolean {
  if (prev === next || (prev.processes === next.processes && prev.threads === next.threads)) return true;
  if (prev.processes.length !== next.processes.length || prev.threads.length !== next.threads.length) return false;
  for (let i = 0; i < prev.processes.length; i++) if (prev.processes[i] !== next.processes[i]) return false;
  for (let i = 0; i < prev.threads.length; i++) {
    const a = prev.threads[i]!;
    const b = next.threads[i]!;
    if (a.process !== b.process || a.thread !== b.thread) return false;
  }
  return true;
}

/**
 * A state's processes (including those only named by a thread) and threads,
 * sorted and unique. Canonical input (as `toStates` emits) passes through
 * after one check, so the diff of two canonical snapshots allocates little.
 */
function sortedContent(state: RuntimeState | undefined): Pick<RuntimeState, 'processes' | 'threads'> {
  if (state === undefined) return { processes: [], threads: [] };
  let { processes, threads } = state;
  if (!increasing(threads, compareThreads)) threads = unique([...threads].sort(compareThreads), compareThreads);
  if (!increasing(processes, compareIds) || !coversThreads(processes, threads)) {
    const all = new Set(processes);
    for (const t of threads) all.add(t.process);
    processes = [...all].sort(compareIds);
  }
  return { processes, threads };
}

function increasing<T>(list: readonly T[], compare: (a: T, b: T) => number): boolean {
  for (let i = 1; i < list.length; i++) if (compare(list[i - 1]!, list[i]!) >= 0) return false;
  return true;
}

function unique<T>(sorted: T[], compare: (a: T, b: T) => number): T[] {
  return sorted.filter((item, i) => i === 0 || compare(sorted[i - 1]!, item) !== 0);
}

/** True when every thread's process is listed (both lists sorted). */
function coversThreads(processes: readonly string[], threads: readonly ThreadRef[]): boolean {
  let p = 0;
  for (const { process } of threads) {
    while (p < processes.length && processes[p]! < process) p++;
    if (processes[p] !== process) return false;
  }
  return true;
}

/** Merge-walks two sorted lists, reporting items only in `a` and only in `b`. */
function walk<T>(
  a: readonly T[],
  b: readonly T[],
  compare: (x: T, y: T) => number,
  onlyA: (x: T) => void,
  onlyB: (y: T) => void,
): void {
  let i = 0;
  let j = 0;
  while (i < a.length || j < b.length) {
    const order = i === a.length ? 1 : j === b.length ? -1 : compare(a[i]!, b[j]!);
    if (order < 0) onlyA(a[i++]!);
    else if (order > 0) onlyB(b[j++]!);
    else {
      i++;
      j++;
    }
  }
}

function contentOps(prevState: RuntimeState | undefined, nextState: RuntimeState): ClusterOp[] {
  if (prevState !== undefined && sameContent(prevState, nextState)) return [];
  const runtimeId = nextState.runtime.id;
  const prev = sortedContent(prevState);
  const next = sortedContent(nextState);
  const removed: ClusterOp[] = [];
  const added: ClusterOp[] = [];
  const gone = new Set<string>();
  walk(
    prev.processes,
    next.processes,
    compareIds,
    (process) => {
      gone.add(process);
      removed.push({ op: 'process.remove', runtimeId, process });
    },
    (process) => added.push({ op: 'process.add', runtimeId, process }),
  );
  const threadOps: ClusterOp[] = [];
  const addedThreads: ClusterOp[] = [];
  walk(
    prev.threads,
    next.threads,
    compareThreads,
    // A removed process took its threads with it; only threads of kept processes need their own op.
    ({ process, thread }) => {
      if (!gone.has(process)) threadOps.push({ op: 'thread.remove', runtimeId, process, thread });
    },
    ({ process, thread }) => addedThreads.push({ op: 'thread.add', runtimeId, process, thread }),
  );
  return [...removed, ...threadOps, ...added, ...addedThreads];
}

/**
 * The ops that turn `prev` into `next` when applied to an index holding
 * `prev` (used for epoch delta commits).
 *
 * Guarantees: `ClusterIndex.from(prev)` + the ops has the same `toStates()`
 * as `ClusterIndex.from(next)`; the number of ops follows the amount of
 * change, not the fleet size (the work does follow the fleet size). Input
 * states are expected to list each runtime once (as `toStates` does).
 */
export function diffStates(prev: readonly RuntimeState[], next: readonly RuntimeState[]): ClusterOp[] {
  const before = byId(prev);
  const after = byId(next);
  const ops: ClusterOp[] = [];
  for (const id of [...before.keys()].sort(compareIds)) {
    if (!after.has(id)) ops.push({ op: 'runtime.remove', runtimeId: id });
  }
  for (const id of [...after.keys()].sort(compareIds)) {
    const was = before.get(id);
    const state = after.get(id)!;
    if (was === state) continue; // epoch states share unchanged runtimes
    const runtime = canonicalRuntime(state.runtime);
    if (was === undefined) ops.push({ op: 'runtime.upsert', runtime });
    else ops.push(...recordOps(canonicalRuntime(was.runtime), runtime));
    ops.push(...contentOps(was, state));
  }
  return ops;
}
