import { RUNTIME_LIMITS } from '@switchyard/protocol';
import type { WatchSnapshot, WatchSnapshotEnd, WatchSnapshotPart } from '@switchyard/protocol';
import { ProcessTable } from './state.ts';

/** A snapshot put together, or why the parts do not make one. */
export type Assembled =
  { readonly ok: true; readonly snapshot: WatchSnapshot } | { readonly ok: false; readonly error: string };

/** Why a part was refused: it does not follow (malformed), or the state it makes passes the limits. */
export interface PartRefusal {
  readonly overLimits: boolean;
  readonly reason: string;
}

export interface SnapshotAssemblerOptions {
  /** Distinct processes the parts may make (a thread's process counts). Default `RUNTIME_LIMITS.processesMax`. */
  readonly processesMax?: number;
  /** Distinct threads the parts may make. Default `RUNTIME_LIMITS.threadsMax`. */
  readonly threadsMax?: number;
}

/**
 * Gathers the `snapshot-part` events of one snapshot on one stream, each
 * already validated, until its `snapshot-end`. It holds the state the parts
 * make, not their lists: an entry listed again (a part that repeats) takes
 * no more room, so what it holds is never more than the finished snapshot
 * would, and is bounded by `processesMax` and `threadsMax` (no single event
 * shows their sum). A new stream takes a new assembler, so parts of two
 * snapshots never mix.
 */
export class SnapshotAssembler {
  readonly #processesMax: number;
  readonly #threadsMax: number;
  #seq = 0;
  #parts = 0;
  #table = new ProcessTable();

  constructor(options: SnapshotAssemblerOptions = {}) {
    this.#processesMax = options.processesMax ?? RUNTIME_LIMITS.processesMax;
    this.#threadsMax = options.threadsMax ?? RUNTIME_LIMITS.threadsMax;
  }

  /** True between a snapshot's first part and its end. */
  get pending(): boolean {
    return this.#parts > 0;
  }

  /** Takes the next part; returns why it is refused, dropping the parts so far, worthless then. */
  add(seq: number, part: WatchSnapshotPart): PartRefusal | undefined {
    const problem = this.#orderProblem(seq, part);
    const refusal = problem === undefined ? this.#take(part) : { overLimits: false, reason: problem };
    if (refusal !== undefined) {
      this.#reset();
      return refusal;
    }
    this.#seq = seq;
    this.#parts++;
    return undefined;
  }

  /** The snapshot the parts and `end` make (ids sorted), and a fresh start either way. */
  finish(seq: number, end: WatchSnapshotEnd): Assembled {
    const [parts, partsSeq, table] = [this.#parts, this.#seq, this.#table];
    this.#reset();
    if (parts === 0) return { ok: false, error: 'no part before it' };
    if (seq !== partsSeq) return { ok: false, error: `id ${seq} ends the snapshot ${partsSeq}` };
    if (end.parts !== parts) return { ok: false, error: `${end.parts} parts announced, ${parts} came` };
    return { ok: true, snapshot: { ...table.canonical(), idleWeight: end.idleWeight, metadata: end.metadata } };
  }

  #orderProblem(seq: number, part: WatchSnapshotPart): string | undefined {
    if (part.part !== this.#parts) return `part ${part.part} where part ${this.#parts} was due`;
    if (this.#parts > 0 && seq !== this.#seq) return `id ${seq} within the snapshot ${this.#seq}`;
    return undefined;
  }

  /** Adds the part's entries, refusing the first that passes a limit. */
  #take(part: WatchSnapshotPart): PartRefusal | undefined {
    const table = this.#table;
    for (const pid of part.processes) {
      if (!this.#roomForProcess(pid)) return this.#overProcesses();
      table.addProcess(pid);
    }
    for (const { process, thread } of part.threads) {
      if (!this.#roomForProcess(process)) return this.#overProcesses();
      if (!table.hasThread(process, thread) && table.threadCount >= this.#threadsMax) {
        return { overLimits: true, reason: `more than ${this.#threadsMax} threads` };
      }
      table.addThread(process, thread);
    }
    return undefined;
  }

  #roomForProcess(pid: string): boolean {
    return this.#table.hasProcess(pid) || this.#table.processCount < this.#processesMax;
  }

  #overProcesses(): PartRefusal {
    return { overLimits: true, reason: `more than ${this.#processesMax} processes` };
  }

  #reset(): void {
    this.#parts = 0;
    this.#table = new ProcessTable();
  }
}
