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
    const keepProcess = (p: string): boolean => this.#processes.get(p) !== false;
    const keepThread = (t: ThreadRef): boolean =>
      !this.#cleared.has(t.process) && this.#threads.get(t.process)?.get(t.thread) !== false;
    const addedProcesses = [...this.#processes].filter(([p, present]) => present && !this.#inBase(p)).map(([p]) => p);
    const addedThreads: ThreadRef[] = [];
    for (const [process, threads] of this.#threads) {
      for (const [thread, present] of threads) {
        if (present && !this.#inBaseThreads(process, thread)) addedThreads.push({ process, thread });
      }
    }
    return {
      runtime: this.runtime,
      processes: mergeSorted((base?.processes ?? []).filter(keepProcess), addedProcesses.sort(compareIds), compareIds),
      threads: mergeSorted((base?.threads ?? []).filter(keepThread), addedThreads.sort(compareThreads), compareThreads),
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
    return this.#base !== undefined && found(this.#base.processes, process, compareIds);
  }

  /** Whether a base thread survives as the output's base list: only when its process was never cleared. */
  #inBaseThreads(process: string, thread: string): boolean {
    if (this.#base === undefined || this.#cleared.has(process)) return false;
    return found(this.#base.threads, { process, thread }, compareThreads);
  }
}

function found<T>(sorted: readonly T[], item: T, compare: (a: T, b: T) => number): boolean {
  let lo = 0;
  let hi = sorted.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    const order = compare(sorted[mid]!, item);
    if (order === 0) return true;
    if (order < 0) lo = mid + 1;
    else hi = mid;
  }
  return false;
}

/** The union of two sorted lists with no item in common, sorted. */
function mergeSorted<T>(a: readonly T[], b: readonly T[], compare: (x: T, y: T) => number): T[] {
  if (b.length === 0) return a as T[];
  const out: T[] = [];
  let i = 0;
  let j = 0;
  while (i < a.length && j < b.length) out.push(compare(a[i]!, b[j]!) < 0 ? a[i++]! : b[j++]!);
  while (i < a.length) out.push(a[i++]!);
  while (j < b.length) out.push(b[j++]!);
  return out;
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
