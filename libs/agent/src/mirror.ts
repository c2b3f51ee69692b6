import { RUNTIME_LIMITS, SwitchyardError } from '@switchyard/protocol';
import type { RuntimeOp, WatchSnapshot } from '@switchyard/protocol';
import { ProcessTable, applyTableOp, sortedRecord } from './state.ts';

export interface RuntimeMirrorOptions {
  /** Called after every snapshot and every non-empty ops batch is applied. */
  readonly onChange?: (mirror: RuntimeMirror) => void;
  /** Processes held at most; an op adding one more is refused. Default: what `runtimeStateSchema` admits. */
  readonly processesMax?: number;
  /** Threads held at most; an op adding one more is refused. Default: what `runtimeStateSchema` admits. */
  readonly threadsMax?: number;
}

/** Defaults of `RuntimeMirror`: the sizes of a runtime's state every replica accepts. */
export const MIRROR_DEFAULTS = {
  processesMax: RUNTIME_LIMITS.processesMax,
  threadsMax: RUNTIME_LIMITS.threadsMax,
} as const;

/**
 * The scheduler's copy of one runtime's state, rebuilt from `/watch` events.
 * Ops mean what they mean in the runtime's store: removing a process removes
 * its threads, adding a thread adds its process, weight and metadata replace
 * the whole value. Applying an op that is already true is a no-op. Input is
 * trusted to be validated event by event; what no single event shows, the
 * size deltas add up to, is bounded here (`processesMax`, `threadsMax`).
 */
export class RuntimeMirror {
  #table = new ProcessTable();
  readonly #onChange: ((mirror: RuntimeMirror) => void) | undefined;
  readonly #processesMax: number;
  readonly #threadsMax: number;
  #idleWeight: Record<string, number> = {};
  #metadata: Record<string, string> = {};

  constructor(options: RuntimeMirrorOptions = {}) {
    this.#onChange = options.onChange;
    this.#processesMax = options.processesMax ?? MIRROR_DEFAULTS.processesMax;
    this.#threadsMax = options.threadsMax ?? MIRROR_DEFAULTS.threadsMax;
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

  /**
   * Replaces everything with `snapshot`. Throws `capacity_exhausted`, keeping
   * what it had, past `processesMax` or `threadsMax`: the schema bounds each
   * list, but a thread's process need not be listed, and is added.
   */
  applySnapshot(snapshot: WatchSnapshot): void {
    const table = new ProcessTable();
    for (const pid of snapshot.processes) table.addProcess(pid);
    for (const { process, thread } of snapshot.threads) table.addThread(process, thread);
    if (table.processCount > this.#processesMax || table.threadCount > this.#threadsMax) {
      const limits = `${this.#processesMax} processes and ${this.#threadsMax} threads`;
      throw new SwitchyardError('capacity_exhausted', `a runtime reports at most ${limits}`);
    }
    this.#table = table;
    this.#idleWeight = sortedRecord(snapshot.idleWeight);
    this.#metadata = sortedRecord(snapshot.metadata);
    this.#onChange?.(this);
  }

  /**
   * Applies ops in order. Throws `capacity_exhausted` at an op that would
   * pass `processesMax` or `threadsMax`, without applying it or reporting a
   * change; the ops before it stay applied (a watcher answers the throw with
   * a fresh snapshot, which replaces everything).
   */
  applyOps(ops: readonly RuntimeOp[]): void {
    for (const op of ops) {
      if (op.op === 'weight') this.#idleWeight = sortedRecord(op.idleWeight);
      else if (op.op === 'metadata') this.#metadata = sortedRecord(op.metadata);
      else {
        this.#checkRoom(op);
        applyTableOp(this.#table, op);
      }
    }
    if (ops.length > 0) this.#onChange?.(this);
  }

  /** Past the limits the runtime's state would fail `runtimeStateSchema` at every replica it reaches. */
  #checkRoom(op: RuntimeOp): void {
    if (op.op !== 'process.add' && op.op !== 'thread.add') return;
    const table = this.#table;
    if (!table.hasProcess(op.process) && table.processCount >= this.#processesMax) {
      throw new SwitchyardError('capacity_exhausted', `a runtime reports at most ${this.#processesMax} processes`);
    }
    if (op.op === 'thread.add' && !table.hasThread(op.process, op.thread) && table.threadCount >= this.#threadsMax) {
      throw new SwitchyardError('capacity_exhausted', `a runtime reports at most ${this.#threadsMax} threads`);
    }
  }

  /** The state in canonical order (ids and keys sorted), comparable with the store's `snapshot()`. */
  state(): WatchSnapshot {
    return { ...this.#table.canonical(), idleWeight: { ...this.#idleWeight }, metadata: { ...this.#metadata } };
  }
}
