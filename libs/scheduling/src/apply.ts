import type { ClusterOp, Runtime, RuntimeState, ThreadRef } from '@switchyard/protocol';
import { canonicalRuntime, compareIds, compareThreads, sortedRecord } from './canonical.ts';

/**
 * The edits ops make to one runtime, kept apart from its (canonical, shared)
 * lists until the end, so a few thread changes on a runtime with thousands
 * of threads cost a merge of sorted lists rather than a rebuild and a sort.
 */
class Draft {
  runtime: Runtime;
  readonly #base: RuntimeState | undefined;
  /** Touched processes: present or not. */
  readonly #processes = new Map<string, boolean>();
  /** Processes removed at some point: their base threads are gone. */
  readonly #cleared = new Set<string>();
  /** Touched threads by process: present or not. */
  readonly #threads = new Map<string, Map<string, boolean>>();

  constructor(runtime: Runtime, base?: RuntimeState) {
    this.runtime = runtime;
    this.#base = base;
  }

  addProcess(process: string): void {
    if (!this.#hasProcess(process)) this.#processes.set(process, true);
  }

  removeProcess(process: string): void {
    this.#processes.set(process, false);
    this.#cleared.add(process);
    this.#threads.delete(process);
  }

  addThread(process: string, thread: string): void {
    this.addProcess(process);
    this.#touched(process).set(thread, true);
  }

  removeThread(process: string, thread: string): void {
    if (this.#hasProcess(process)) this.#touched(process).set(thread, false);
  }

  state(): RuntimeState {
    const base = this.#base;
    if (base !== undefined && this.#processes.size === 0 && this.#threads.size === 0) {
      return { runtime: this.runtime, processes: base.processes, threads: base.threads };
    }
    const baseProcesses = base?.processes ?? [];
    const baseThreads = base?.threads ?? [];
    const processDrops: Array<[number, number]> = [];
    const processAdds: string[] = [];
    for (const [process, present] of this.#processes) {
      const at = lowerBound(baseProcesses, (p) => p < process);
      const inBase = baseProcesses[at] === process;
      if (present && !inBase) processAdds.push(process);
      if (!present && inBase) processDrops.push([at, at + 1]);
    }
    const threadDrops: Array<[number, number]> = [];
    for (const process of this.#cleared) {
      const from = lowerBound(baseThreads, (t) => t.process < process);
      const to = lowerBound(baseThreads, (t) => t.process <= process);
      if (from < to) threadDrops.push([from, to]);
    }
    const threadAdds: ThreadRef[] = [];
    for (const [process, threads] of this.#threads) {
      const cleared = this.#cleared.has(process);
      for (const [thread, present] of threads) {
        const ref = { process, thread };
        const at = lowerBound(baseThreads, (t) => compareThreads(t, ref) < 0);
        const inBase = !cleared && at < baseThreads.length && compareThreads(baseThreads[at]!, ref) === 0;
        if (present && !inBase) threadAdds.push(ref);
        if (!present && inBase) threadDrops.push([at, at + 1]);
      }
    }
    return {
      runtime: this.runtime,
      processes: edited(baseProcesses, processDrops, processAdds.sort(compareIds), (a, b) => a < b),
      threads: edited(baseThreads, threadDrops, threadAdds.sort(compareThreads), (a, b) => compareThreads(a, b) < 0),
    };
  }

  #touched(process: string): Map<string, boolean> {
    let threads = this.#threads.get(process);
    if (!threads) this.#threads.set(process, (threads = new Map()));
    return threads;
  }

  #hasProcess(process: string): boolean {
    return this.#processes.get(process) ?? this.#inBase(process);
  }

  #inBase(process: string): boolean {
    const processes = this.#base?.processes ?? [];
    return processes[lowerBound(processes, (p) => p < process)] === process;
  }
}

/** The first index whose item is not `before` the sought one (`sorted` is ordered so that `before` holds for a prefix). */
function lowerBound<T>(sorted: readonly T[], before: (item: T) => boolean): number {
  let lo = 0;
  let hi = sorted.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (before(sorted[mid]!)) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/**
 * `sorted` without the index ranges `drops` (disjoint) and with `adds`
 * (sorted, none equal to a kept item) in order. Copies the kept runs as
 * slices and places each addition by binary search, so the cost is a copy
 * of the list plus a few comparisons per edit, not a comparison per item.
 */
function edited<T>(
  sorted: readonly T[],
  drops: Array<[number, number]>,
  adds: readonly T[],
  less: (a: T, b: T) => boolean,
): T[] {
  let kept = sorted as T[];
  if (drops.length > 0) {
    drops.sort((a, b) => a[0] - b[0]);
    const runs: T[][] = [];
    let from = 0;
    for (const [start, end] of drops) {
      runs.push(sorted.slice(from, start));
      from = end;
    }
    runs.push(sorted.slice(from));
    kept = ([] as T[]).concat(...runs);
  }
  if (adds.length === 0) return kept;
  const runs: T[][] = [];
  let from = 0;
  for (const item of adds) {
    const at = lowerBound(kept, (k) => less(k, item));
    runs.push(kept.slice(from, at), [item]);
    from = at;
  }
  runs.push(kept.slice(from));
  return ([] as T[]).concat(...runs);
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
    const made = new Draft(state.runtime, state);
    drafts.set(id, made);
    return made;
  };
  for (const op of ops) {
    if (op.op === 'runtime.upsert') {
      const runtime = canonicalRuntime(op.runtime);
      const existing = draft(runtime.id);
      if (existing) existing.runtime = runtime;
      else drafts.set(runtime.id, new Draft(runtime));
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
        d.addProcess(op.process);
        break;
      case 'process.remove':
        d.removeProcess(op.process);
        break;
      case 'thread.add':
        d.addThread(op.process, op.thread);
        break;
      case 'thread.remove':
        d.removeThread(op.process, op.thread);
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
    if (touched !== undefined) out.push(touched.state());
    else out.push(current.get(id)!);
  }
  return out;
}
