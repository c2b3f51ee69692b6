import type { ClusterOp, Runtime, RuntimeState } from '@switchyard/protocol';
import { canonicalRuntime, compareIds, sameIdentity, sameRecord } from './canonical.ts';
import { ClusterIndex } from './cluster-index.ts';

/**
 * Merges the parts reported by every replica into one canonical snapshot.
 *
 * Guarantees: the result does not depend on the order of the parts or of
 * their runtimes. A runtime reported by several replicas resolves to the
 * report with the higher `generation`, then the lexicographically higher
 * `owner`; the losing reports contribute nothing (no union of processes).
 * Output as `ClusterIndex.toStates()`: runtimes by id, lists sorted.
 */
export function mergeParts(parts: ReadonlyArray<readonly RuntimeState[]>): RuntimeState[] {
  return ClusterIndex.from(parts.flat()).toStates();
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

// Thread keys joined with NUL: identity values never contain it.
const threadKey = (process: string, thread: string): string => `${process}\u0000${thread}`;

/** Element-wise equality of the lists: the common case of an untouched runtime, without allocating. */
function sameContent(prev: RuntimeState, next: RuntimeState): boolean {
  if (prev === next) return true;
  if (prev.processes.length !== next.processes.length || prev.threads.length !== next.threads.length) return false;
  for (let i = 0; i < prev.processes.length; i++) if (prev.processes[i] !== next.processes[i]) return false;
  for (let i = 0; i < prev.threads.length; i++) {
    const a = prev.threads[i]!;
    const b = next.threads[i]!;
    if (a.process !== b.process || a.thread !== b.thread) return false;
  }
  return true;
}

function contentOps(prev: RuntimeState | undefined, next: RuntimeState): ClusterOp[] {
  if (prev !== undefined && sameContent(prev, next)) return [];
  const runtimeId = next.runtime.id;
  const prevProcesses = new Set(prev?.processes);
  const nextProcesses = new Set(next.processes);
  for (const t of next.threads) nextProcesses.add(t.process);
  const prevThreads = new Set(prev?.threads.map((t) => threadKey(t.process, t.thread)));
  for (const t of prev?.threads ?? []) prevProcesses.add(t.process);
  const nextThreads = new Set(next.threads.map((t) => threadKey(t.process, t.thread)));

  const ops: ClusterOp[] = [];
  const removed = [...prevProcesses].filter((p) => !nextProcesses.has(p)).sort(compareIds);
  for (const process of removed) ops.push({ op: 'process.remove', runtimeId, process });
  // A removed process took its threads with it; only threads of kept processes need their own op.
  const goneThreads = (prev?.threads ?? []).filter(
    (t) => nextProcesses.has(t.process) && !nextThreads.has(threadKey(t.process, t.thread)),
  );
  for (const { process, thread } of goneThreads) ops.push({ op: 'thread.remove', runtimeId, process, thread });
  const added = [...nextProcesses].filter((p) => !prevProcesses.has(p)).sort(compareIds);
  for (const process of added) ops.push({ op: 'process.add', runtimeId, process });
  for (const { process, thread } of next.threads) {
    if (!prevThreads.has(threadKey(process, thread))) ops.push({ op: 'thread.add', runtimeId, process, thread });
  }
  return ops;
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
    const runtime = canonicalRuntime(state.runtime);
    if (was === undefined) ops.push({ op: 'runtime.upsert', runtime });
    else ops.push(...recordOps(canonicalRuntime(was.runtime), runtime));
    ops.push(...contentOps(was, state));
  }
  return ops;
}
