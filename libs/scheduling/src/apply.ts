import type { ClusterOp, Runtime, RuntimeState, ThreadRef } from '@switchyard/protocol';
import { canonicalRuntime, compareIds, sortedRecord } from './canonical.ts';

interface Draft {
  runtime: Runtime;
  readonly procs: Map<string, Set<string>>;
}

function draftOf(state: RuntimeState): Draft {
  const procs = new Map<string, Set<string>>();
  for (const process of state.processes) procs.set(process, new Set());
  for (const { process, thread } of state.threads) {
    let threads = procs.get(process);
    if (!threads) procs.set(process, (threads = new Set()));
    threads.add(thread);
  }
  return { runtime: state.runtime, procs };
}

function stateOf(draft: Draft): RuntimeState {
  const processes = [...draft.procs.keys()].sort(compareIds);
  const threads: ThreadRef[] = [];
  for (const process of processes) {
    for (const thread of [...draft.procs.get(process)!].sort(compareIds)) threads.push({ process, thread });
  }
  return { runtime: draft.runtime, processes, threads };
}

/**
 * Applies ops to a state in wire form and returns the new state, leaving the
 * input untouched: what `ClusterIndex.from(states)`, `applyAll(ops)`,
 * `toStates()` returns, at a cost that follows the runtimes the ops touch
 * rather than the size of the whole state (untouched runtimes are shared,
 * not copied). `states` must be canonical (as `toStates`, `mergeParts` and
 * this function return them).
 */
export function applyOps(states: readonly RuntimeState[], ops: readonly ClusterOp[]): RuntimeState[] {
  const current = new Map<string, RuntimeState>();
  for (const state of states) current.set(state.runtime.id, state);
  /** Touched runtimes; `null` once removed. */
  const drafts = new Map<string, Draft | null>();
  const draft = (id: string): Draft | undefined => {
    const seen = drafts.get(id);
    if (seen !== undefined) return seen ?? undefined;
    const state = current.get(id);
    if (state === undefined) return undefined;
    const made = draftOf(state);
    drafts.set(id, made);
    return made;
  };
  for (const op of ops) {
    if (op.op === 'runtime.upsert') {
      const runtime = canonicalRuntime(op.runtime);
      const existing = draft(runtime.id);
      if (existing) existing.runtime = runtime;
      else drafts.set(runtime.id, { runtime, procs: new Map() });
      continue;
    }
    const d = draft(op.runtimeId);
    if (d === undefined) continue;
    switch (op.op) {
      case 'runtime.remove':
        drafts.set(op.runtimeId, null);
        break;
      case 'runtime.available':
        if (d.runtime.available !== op.available) d.runtime = Object.freeze({ ...d.runtime, available: op.available });
        break;
      case 'weight':
        d.runtime = Object.freeze({ ...d.runtime, idleWeight: Object.freeze(sortedRecord(op.idleWeight)) });
        break;
      case 'metadata':
        d.runtime = Object.freeze({ ...d.runtime, metadata: Object.freeze(sortedRecord(op.metadata)) });
        break;
      case 'process.add':
        if (!d.procs.has(op.process)) d.procs.set(op.process, new Set());
        break;
      case 'process.remove':
        d.procs.delete(op.process);
        break;
      case 'thread.add': {
        let threads = d.procs.get(op.process);
        if (!threads) d.procs.set(op.process, (threads = new Set()));
        threads.add(op.thread);
        break;
      }
      case 'thread.remove':
        d.procs.get(op.process)?.delete(op.thread);
        break;
    }
  }
  if (drafts.size === 0) return [...states];
  const ids = new Set(current.keys());
  for (const id of drafts.keys()) ids.add(id);
  const out: RuntimeState[] = [];
  for (const id of [...ids].sort(compareIds)) {
    const touched = drafts.get(id);
    if (touched === null) continue;
    if (touched !== undefined) out.push(stateOf(touched));
    else out.push(current.get(id)!);
  }
  return out;
}
