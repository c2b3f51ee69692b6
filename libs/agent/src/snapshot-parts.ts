import { RUNTIME_LIMITS } from '@switchyard/protocol';
import type { ThreadRef, WatchSnapshot, WatchSnapshotEnd, WatchSnapshotPart } from '@switchyard/protocol';

/** A snapshot put together, or why the parts do not make one. */
export type Assembled =
  { readonly ok: true; readonly snapshot: WatchSnapshot } | { readonly ok: false; readonly error: string };

/**
 * Gathers the `snapshot-part` events of one snapshot on one stream, each
 * already validated, until its `snapshot-end`. What it holds is bounded by
 * the state limits (`RUNTIME_LIMITS`, processes and threads counted), the
 * lists a whole snapshot may carry: no single event shows their sum. A new
 * stream takes a new assembler, so parts of two snapshots never mix.
 */
export class SnapshotAssembler {
  #seq = 0;
  #parts = 0;
  #processes: string[] = [];
  #threads: ThreadRef[] = [];

  /** True between a snapshot's first part and its end. */
  get pending(): boolean {
    return this.#parts > 0;
  }

  /** Takes the next part; returns why it does not follow, dropping the parts so far, worthless then. */
  add(seq: number, part: WatchSnapshotPart): string | undefined {
    const problem = this.#problemOf(seq, part);
    if (problem !== undefined) {
      this.#reset();
      return problem;
    }
    this.#processes.push(...part.processes);
    this.#threads.push(...part.threads);
    this.#seq = seq;
    this.#parts++;
    return undefined;
  }

  /** The snapshot the parts and `end` make, and a fresh start either way. */
  finish(seq: number, end: WatchSnapshotEnd): Assembled {
    const [parts, partsSeq, processes, threads] = [this.#parts, this.#seq, this.#processes, this.#threads];
    this.#reset();
    if (parts === 0) return { ok: false, error: 'no part before it' };
    if (seq !== partsSeq) return { ok: false, error: `id ${seq} ends the snapshot ${partsSeq}` };
    if (end.parts !== parts) return { ok: false, error: `${end.parts} parts announced, ${parts} came` };
    return { ok: true, snapshot: { processes, threads, idleWeight: end.idleWeight, metadata: end.metadata } };
  }

  #problemOf(seq: number, part: WatchSnapshotPart): string | undefined {
    if (part.part !== this.#parts) return `part ${part.part} where part ${this.#parts} was due`;
    if (this.#parts > 0 && seq !== this.#seq) return `id ${seq} within the snapshot ${this.#seq}`;
    if (this.#processes.length + part.processes.length > RUNTIME_LIMITS.processesMax) {
      return `more than ${RUNTIME_LIMITS.processesMax} processes`;
    }
    if (this.#threads.length + part.threads.length > RUNTIME_LIMITS.threadsMax) {
      return `more than ${RUNTIME_LIMITS.threadsMax} threads`;
    }
    return undefined;
  }

  #reset(): void {
    this.#parts = 0;
    this.#processes = [];
    this.#threads = [];
  }
}
