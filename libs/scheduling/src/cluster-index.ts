import type { ClusterOp, Runtime, RuntimeState, ThreadRef } from '@switchyard/protocol';
import { RuntimeEntry } from './candidate.ts';
import { canonicalRuntime, compareIds, preferState, sortedRecord } from './canonical.ts';
import { inverseOf } from './inverse.ts';
import { SortedRuntimes } from './sorted.ts';
import type { OpenView } from './sorted.ts';

const NO_RUNTIMES: readonly Runtime[] = Object.freeze([]);
const NO_ENTRIES: readonly RuntimeEntry[] = Object.freeze([]);
const NO_HOLDERS: readonly string[] = Object.freeze([]);

/** Placement counts of an index; a process or thread held by two runtimes counts twice. */
export interface ClusterCounts {
  readonly runtimes: number;
  readonly processes: number;
  readonly threads: number;
}

/**
 * Where a process lives: its holders sorted by id, each with its thread set
 * (the same Set object as in the holder's `procs`, null until the first
 * thread). The thread fast path reads this one record instead of going
 * through each holder's process map: half the hash lookups per decision.
 */
export interface Held {
  readonly ids: readonly string[];
  readonly entries: readonly RuntimeEntry[];
  readonly threads: (Set<string> | null)[];
}

// Sibling modules (the pipeline, the inverse) read entries through these
// instead of public methods, so the public surface stays records only.
let entryOf: (index: ClusterIndex, id: string) => RuntimeEntry | undefined;
let classEntriesOf: (index: ClusterIndex, cls: string) => readonly RuntimeEntry[];
let classOpenOf: (index: ClusterIndex, cls: string) => OpenView | undefined;
let heldOf: (index: ClusterIndex, processId: string) => Held | undefined;

/** Where a process lives (internal to this lib); see `Held`. */
export function indexHeld(index: ClusterIndex, processId: string): Held | undefined {
  return heldOf(index, processId);
}

/** The index's entry for a runtime (internal to this lib). */
export function indexEntry(index: ClusterIndex, id: string): RuntimeEntry | undefined {
  return entryOf(index, id);
}

/** The index's entries serving a class, sorted by id (internal to this lib). */
export function indexClassEntries(index: ClusterIndex, cls: string): readonly RuntimeEntry[] {
  return classEntriesOf(index, cls);
}

/** The open subset of a class (internal to this lib); see `OpenView`. */
export function indexClassOpen(index: ClusterIndex, cls: string): OpenView | undefined {
  return classOpenOf(index, cls);
}

/**
 * The cluster snapshot as the scheduler queries it: runtimes by id and by
 * class (sorted by id), process holders, and threads under their process.
 *
 * Guarantees: the observable state depends only on the set of facts, never
 * on the order they were inserted in (lists are sorted by id, records are
 * canonicalised), so two replicas with the same snapshot answer alike. Ops on
 * unknown runtimes are ignored; removing a runtime removes what it held;
 * adding a thread adds its process; removing a process removes its threads.
 *
 * Not guaranteed: arrays returned by `runtimes`, `runtimesOfClass` are live
 * views that later `apply` calls change; copy them to keep them. Nothing is
 * validated here: ops are expected to have passed the protocol schemas.
 * Sizes are bounded by the protocol limits on snapshots and parts.
 */
/** A runtime's record with the sizes of what it holds. */
export interface RuntimeSummary {
  readonly runtime: Runtime;
  readonly processes: number;
  readonly threads: number;
}

export class ClusterIndex {
  readonly #entries = new Map<string, RuntimeEntry>();
  readonly #all = new SortedRuntimes();
  readonly #byClass = new Map<string, SortedRuntimes>();
  readonly #holders = new Map<string, Held>();
  #processes = 0;
  #threads = 0;

  static {
    entryOf = (index, id) => index.#entries.get(id);
    classEntriesOf = (index, cls) => index.#byClass.get(cls)?.entries ?? NO_ENTRIES;
    classOpenOf = (index, cls) => index.#byClass.get(cls)?.open();
    heldOf = (index, processId) => index.#holders.get(processId);
  }

  /** Builds an index; a runtime listed twice resolves as in `mergeParts` (generation, then owner). */
  static from(runtimes: readonly RuntimeState[]): ClusterIndex {
    const winners = new Map<string, RuntimeState>();
    for (const state of runtimes) {
      const seen = winners.get(state.runtime.id);
      winners.set(state.runtime.id, seen === undefined ? state : preferState(seen, state));
    }
    const index = new ClusterIndex();
    for (const state of winners.values()) {
      const id = state.runtime.id;
      index.#upsert(state.runtime);
      const entry = index.#entries.get(id)!;
      for (const processId of state.processes) index.#addProcess(entry, processId);
      for (const { process, thread } of state.threads) index.#addThread(entry, process, thread);
    }
    return index;
  }

  apply(op: ClusterOp): void {
    if (op.op === 'runtime.upsert') return this.#upsert(op.runtime);
    const entry = this.#entries.get(op.runtimeId);
    if (entry === undefined) return;
    switch (op.op) {
      case 'runtime.remove':
        return this.#remove(entry);
      case 'runtime.available':
        if (entry.runtime.available !== op.available)
          this.#replace(entry, { ...entry.runtime, available: op.available });
        return;
      case 'process.add':
        return this.#addProcess(entry, op.process);
      case 'process.remove':
        return this.#removeProcess(entry, op.process);
      case 'thread.add':
        return this.#addThread(entry, op.process, op.thread);
      case 'thread.remove':
        return this.#removeThread(entry, op.process, op.thread);
      case 'weight':
        return this.#replace(entry, { ...entry.runtime, idleWeight: Object.freeze(sortedRecord(op.idleWeight)) });
      case 'metadata':
        return this.#replace(entry, { ...entry.runtime, metadata: Object.freeze(sortedRecord(op.metadata)) });
    }
  }

  applyAll(ops: readonly ClusterOp[]): void {
    for (const op of ops) this.apply(op);
  }

  /** Ops that undo `op` when applied right after it; computed from the current (pre-`op`) state. */
  inverse(op: ClusterOp): ClusterOp[] {
    return inverseOf(
      op,
      op.op === 'runtime.upsert' ? this.#entries.get(op.runtime.id) : this.#entries.get(op.runtimeId),
    );
  }

  /** Canonical state: runtimes by id, processes sorted, threads sorted by process then thread. */
  toStates(): RuntimeState[] {
    return this.#all.entries.map(stateOf);
  }

  /** One runtime's state in canonical wire form, without building the others. */
  state(id: string): RuntimeState | undefined {
    const entry = this.#entries.get(id);
    return entry && stateOf(entry);
  }

  /** Every runtime with how many processes and threads it holds, sorted by id; no lists are built. */
  summaries(): RuntimeSummary[] {
    return this.#all.entries.map((entry) => {
      let threads = 0;
      for (const set of entry.procs.values()) threads += set?.size ?? 0;
      return { runtime: entry.runtime, processes: entry.procs.size, threads };
    });
  }

  runtime(id: string): Runtime | undefined {
    return this.#entries.get(id)?.runtime;
  }

  /** Every runtime, sorted by id (live view). */
  runtimes(): readonly Runtime[] {
    return this.#all.runtimes;
  }

  /** Runtimes that list `cls` among their classes, sorted by id (live view). */
  runtimesOfClass(cls: string): readonly Runtime[] {
    return this.#byClass.get(cls)?.runtimes ?? NO_RUNTIMES;
  }

  /** Ids of the runtimes holding a process, sorted; a fresh array per change, safe to keep. */
  holdersOf(processId: string): readonly string[] {
    return this.#holders.get(processId)?.ids ?? NO_HOLDERS;
  }

  /** The runtime serving a thread; if several claim it, the lowest id. */
  threadRuntime(processId: string, threadId: string): string | undefined {
    const held = this.#holders.get(processId);
    if (held === undefined) return undefined;
    for (let i = 0; i < held.ids.length; i++) if (held.threads[i]?.has(threadId)) return held.ids[i];
    return undefined;
  }

  counts(): ClusterCounts {
    return { runtimes: this.#entries.size, processes: this.#processes, threads: this.#threads };
  }

  #upsert(input: Runtime): void {
    const runtime = canonicalRuntime(input);
    const entry = this.#entries.get(runtime.id);
    if (entry === undefined) {
      const created = new RuntimeEntry(runtime);
      this.#entries.set(runtime.id, created);
      this.#all.insert(created);
      for (const cls of runtime.classes) this.#classList(cls).insert(created);
      return;
    }
    const before = entry.runtime.classes;
    entry.setRuntime(runtime);
    this.#all.refresh(entry);
    for (const cls of before) if (!runtime.classes.includes(cls)) this.#leaveClass(cls, entry.id);
    for (const cls of runtime.classes) this.#classList(cls).insert(entry);
  }

  #replace(entry: RuntimeEntry, runtime: Runtime): void {
    entry.setRuntime(Object.freeze(runtime));
    this.#all.refresh(entry);
    for (const cls of runtime.classes) this.#byClass.get(cls)?.refresh(entry);
  }

  #remove(entry: RuntimeEntry): void {
    for (const processId of [...entry.procs.keys()]) this.#removeProcess(entry, processId);
    for (const cls of entry.runtime.classes) this.#leaveClass(cls, entry.id);
    this.#all.remove(entry.id);
    this.#entries.delete(entry.id);
  }

  #classList(cls: string): SortedRuntimes {
    let list = this.#byClass.get(cls);
    if (list === undefined) this.#byClass.set(cls, (list = new SortedRuntimes()));
    return list;
  }

  #leaveClass(cls: string, id: string): void {
    const list = this.#byClass.get(cls);
    if (list === undefined) return;
    list.remove(id);
    if (list.size === 0) this.#byClass.delete(cls);
  }

  #addProcess(entry: RuntimeEntry, processId: string): void {
    if (entry.procs.has(processId)) return;
    entry.procs.set(processId, null);
    this.#processes++;
    const held = this.#holders.get(processId);
    if (held === undefined) {
      this.#holders.set(processId, { ids: Object.freeze([entry.id]), entries: [entry], threads: [null] });
      return;
    }
    // Copy-on-write: `ids` arrays already handed out by holdersOf stay as they were.
    let at = 0;
    while (at < held.ids.length && held.ids[at]! < entry.id) at++;
    const ids = [...held.ids];
    const entries = [...held.entries];
    const threads = [...held.threads];
    ids.splice(at, 0, entry.id);
    entries.splice(at, 0, entry);
    threads.splice(at, 0, null);
    this.#holders.set(processId, { ids: Object.freeze(ids), entries, threads });
  }

  #removeProcess(entry: RuntimeEntry, processId: string): void {
    if (!entry.procs.has(processId)) return;
    this.#threads -= entry.procs.get(processId)?.size ?? 0;
    entry.procs.delete(processId);
    this.#processes--;
    const held = this.#holders.get(processId)!;
    const at = held.entries.indexOf(entry);
    if (held.ids.length === 1) {
      this.#holders.delete(processId);
      return;
    }
    const keep = (_: unknown, i: number): boolean => i !== at;
    this.#holders.set(processId, {
      ids: Object.freeze(held.ids.filter(keep)),
      entries: held.entries.filter(keep),
      threads: held.threads.filter(keep),
    });
  }

  #addThread(entry: RuntimeEntry, processId: string, threadId: string): void {
    this.#addProcess(entry, processId);
    let threads = entry.procs.get(processId);
    if (threads === null || threads === undefined) {
      entry.procs.set(processId, (threads = new Set()));
      const held = this.#holders.get(processId)!;
      held.threads[held.entries.indexOf(entry)] = threads;
    }
    if (threads.has(threadId)) return;
    threads.add(threadId);
    this.#threads++;
  }

  #removeThread(entry: RuntimeEntry, processId: string, threadId: string): void {
    const threads = entry.procs.get(processId);
    if (threads === null || threads === undefined || !threads.delete(threadId)) return;
    this.#threads--;
  }
}

function stateOf(entry: RuntimeEntry): RuntimeState {
  const processes = [...entry.procs.keys()].sort(compareIds);
  const threads: ThreadRef[] = [];
  for (const process of processes) {
    const set = entry.procs.get(process);
    if (set) for (const thread of [...set].sort(compareIds)) threads.push({ process, thread });
  }
  return { runtime: entry.runtime, processes, threads };
}
