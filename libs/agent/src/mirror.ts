import type { RuntimeOp, WatchSnapshot } from '@switchyard/protocol';
import { ProcessTable, applyTableOp, sortedRecord } from './state.ts';

export interface RuntimeMirrorOptions {
  /** Called after every snapshot and every non-empty ops batch is applied. */
  readonly onChange?: (mirror: RuntimeMirror) => void;
}

/**
 * The scheduler's copy of one runtime's state, rebuilt from `/watch` events.
 * Ops mean what they mean in the runtime's store: removing a process removes
 * its threads, adding a thread adds its process, weight and metadata replace
 * the whole value. Applying an op that is already true is a no-op. Size is
 * bounded by what the protocol schemas admit; the mirror trusts validated input.
 */
export class RuntimeMirror {
  readonly #table = new ProcessTable();
  readonly #onChange: ((mirror: RuntimeMirror) => void) | undefined;
  #idleWeight: Record<string, number> = {};
  #metadata: Record<string, string> = {};

  constructor(options: RuntimeMirrorOptions = {}) {
    this.#onChange = options.onChange;
  }

  get processCount(): number {
    return this.#table.processCount;
  }

  get threadCount(): number {
    return this.#table.threadCount;
  }

  hasProcess(pid: string): boolean {
    return this.#table.hasProcess(pid);
  }

  hasThread(pid: string, tid: string): boolean {
    return this.#table.hasThread(pid, tid);
  }

  /** Replaces everything with `snapshot`. */
  applySnapshot(snapshot: WatchSnapshot): void {
    this.#table.clear();
    for (const pid of snapshot.processes) this.#table.addProcess(pid);
    for (const { process, thread } of snapshot.threads) this.#table.addThread(process, thread);
    this.#idleWeight = sortedRecord(snapshot.idleWeight);
    this.#metadata = sortedRecord(snapshot.metadata);
    this.#onChange?.(this);
  }

  /** Applies ops in order. */
  applyOps(ops: readonly RuntimeOp[]): void {
    for (const op of ops) {
      if (op.op === 'weight') this.#idleWeight = sortedRecord(op.idleWeight);
      else if (op.op === 'metadata') this.#metadata = sortedRecord(op.metadata);
      else applyTableOp(this.#table, op);
    }
    if (ops.length > 0) this.#onChange?.(this);
  }

  /** The state in canonical order (ids and keys sorted), comparable with the store's `snapshot()`. */
  state(): WatchSnapshot {
    return { ...this.#table.canonical(), idleWeight: { ...this.#idleWeight }, metadata: { ...this.#metadata } };
  }
}
