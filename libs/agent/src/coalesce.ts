import type { RuntimeOp } from '@switchyard/protocol';
import type { ProcessTable } from './state.ts';

interface ThreadTouch {
  readonly process: string;
  readonly thread: string;
  readonly before: boolean;
}

/**
 * Remembers, per key touched since the last flush, whether it existed at the
 * last flush. Draining compares that with the present, so an add and a remove
 * of the same key cancel, repeats keep the last value, and the cost follows
 * the number of keys touched, not the size of the state.
 */
export class Coalescer {
  readonly #processes = new Map<string, boolean>();
  readonly #threads = new Map<string, ThreadTouch>();
  #weightBefore: Record<string, number> | undefined;
  #metadataBefore: Record<string, string> | undefined;

  /** Distinct keys touched since the last drain. */
  get size(): number {
    return this.#processes.size + this.#threads.size;
  }

  touchProcess(pid: string, existed: boolean): void {
    if (!this.#processes.has(pid)) this.#processes.set(pid, existed);
  }

  touchThread(pid: string, tid: string, existed: boolean): void {
    const key = `${pid}/${tid}`;
    if (!this.#threads.has(key)) this.#threads.set(key, { process: pid, thread: tid, before: existed });
  }

  touchWeight(before: Record<string, number>): void {
    this.#weightBefore ??= before;
  }

  touchMetadata(before: Record<string, string>): void {
    this.#metadataBefore ??= before;
  }

  /**
   * The ops that take the last flushed state to the present one, in an order
   * that is safe to apply: removals before additions, processes added before
   * their threads. Thread removals implied by a process removal are left out.
   */
  drain(table: ProcessTable, weight: Record<string, number>, metadata: Record<string, string>): RuntimeOp[] {
    const removedProcesses: RuntimeOp[] = [];
    const addedProcesses: RuntimeOp[] = [];
    const gone = new Set<string>();
    for (const [pid, before] of this.#processes) {
      const now = table.hasProcess(pid);
      if (before && !now) {
        removedProcesses.push({ op: 'process.remove', process: pid });
        gone.add(pid);
      } else if (!before && now) addedProcesses.push({ op: 'process.add', process: pid });
    }
    const removedThreads: RuntimeOp[] = [];
    const addedThreads: RuntimeOp[] = [];
    for (const { process, thread, before } of this.#threads.values()) {
      const now = table.hasThread(process, thread);
      if (before && !now && !gone.has(process)) removedThreads.push({ op: 'thread.remove', process, thread });
      else if (!before && now) addedThreads.push({ op: 'thread.add', process, thread });
    }
    const ops = [...removedThreads, ...removedProcesses, ...addedProcesses, ...addedThreads];
    if (this.#weightBefore && !sameJson(this.#weightBefore, weight))
      ops.push({ op: 'weight', idleWeight: { ...weight } });
    if (this.#metadataBefore && !sameJson(this.#metadataBefore, metadata)) {
      ops.push({ op: 'metadata', metadata: { ...metadata } });
    }
    this.#processes.clear();
    this.#threads.clear();
    this.#weightBefore = undefined;
    this.#metadataBefore = undefined;
    return ops;
  }
}

/** Both records are kept with sorted keys, so their JSON compares by value. */
function sameJson(a: unknown, b: unknown): boolean {
  return JSON.stringify(a) === JSON.stringify(b);
}
