import type { RuntimeOp, WatchSnapshot } from '@switchyard/protocol';

/**
 * Processes and their threads, shared by the runtime's store and the
 * scheduler's mirror so that both apply an op with the same meaning:
 * removing a process removes its threads; adding a thread adds its process.
 */
export class ProcessTable {
  readonly #processes = new Map<string, Set<string>>();
  #threadCount = 0;

  get processCount(): number {
    return this.#processes.size;
  }

  get threadCount(): number {
    return this.#threadCount;
  }

  hasProcess(pid: string): boolean {
    return this.#processes.has(pid);
  }

  hasThread(pid: string, tid: string): boolean {
    return this.#processes.get(pid)?.has(tid) ?? false;
  }

  /** Threads of `pid`, in insertion order; empty when the process is absent. */
  threadsOf(pid: string): readonly string[] {
    const threads = this.#processes.get(pid);
    return threads ? [...threads] : [];
  }

  /** Returns false when the process was already there. */
  addProcess(pid: string): boolean {
    if (this.#processes.has(pid)) return false;
    this.#processes.set(pid, new Set());
    return true;
  }

  /** Returns false when the process was absent. */
  removeProcess(pid: string): boolean {
    const threads = this.#processes.get(pid);
    if (!threads) return false;
    this.#threadCount -= threads.size;
    this.#processes.delete(pid);
    return true;
  }

  /** Returns false when the thread was already there. */
  addThread(pid: string, tid: string): boolean {
    let threads = this.#processes.get(pid);
    if (!threads) {
      threads = new Set();
      this.#processes.set(pid, threads);
    }
    if (threads.has(tid)) return false;
    threads.add(tid);
    this.#threadCount++;
    return true;
  }

  /** Returns false when the thread was absent. The process stays. */
  removeThread(pid: string, tid: string): boolean {
    const removed = this.#processes.get(pid)?.delete(tid) ?? false;
    if (removed) this.#threadCount--;
    return removed;
  }

  clear(): void {
    this.#processes.clear();
    this.#threadCount = 0;
  }

  /** Processes and threads sorted by id, so equal states compare equal whatever the insertion order. */
  canonical(): Pick<WatchSnapshot, 'processes' | 'threads'> {
    const processes = [...this.#processes.keys()].sort(compareIds);
    const threads: { process: string; thread: string }[] = [];
    for (const pid of processes) {
      for (const tid of [...this.#processes.get(pid)!].sort(compareIds)) threads.push({ process: pid, thread: tid });
    }
    return { processes, threads };
  }
}

/** Code-unit order: identity values are ASCII, so this is stable across locales. */
export function compareIds(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/** A copy of a string record with keys sorted, for canonical output. */
export function sortedRecord<V>(record: Readonly<Record<string, V>>): Record<string, V> {
  const out: Record<string, V> = {};
  for (const key of Object.keys(record).sort(compareIds)) out[key] = record[key]!;
  return out;
}

/** Applies one op to a table; weight and metadata ops are the caller's. */
export function applyTableOp(table: ProcessTable, op: RuntimeOp): void {
  switch (op.op) {
    case 'process.add':
      table.addProcess(op.process);
      break;
    case 'process.remove':
      table.removeProcess(op.process);
      break;
    case 'thread.add':
      table.addThread(op.process, op.thread);
      break;
    case 'thread.remove':
      table.removeThread(op.process, op.thread);
      break;
    default:
      break;
  }
}
