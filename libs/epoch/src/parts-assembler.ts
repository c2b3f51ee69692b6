import { isDeepStrictEqual } from 'node:util';
import { RUNTIME_LIMITS, SYNC_PART_LIMITS } from '@switchyard/protocol';
import type { RuntimeState, SyncMessage, SyncPart, SyncRunEnd } from '@switchyard/protocol';

/** Starts the problem of a run whose frames pass `runBytesMax`: the side that refuses it names the limit. */
export const RUN_TOO_BIG = 'above runBytesMax';

/** The message a run of parts makes, or why the parts do not make one. */
export type Assembled =
  { readonly ok: true; readonly msg: SyncMessage } | { readonly ok: false; readonly error: string };

interface Run {
  readonly term: number;
  readonly epoch: number;
  parts: number;
  /** Bytes of the run's frames so far. */
  bytes: number;
  /** The runtimes so far; the last one's lists may still grow. Owned here: parsed frames are fresh objects. */
  readonly runtimes: RuntimeState[];
  readonly ids: Set<string>;
}

/**
 * Gathers the `part` frames of one run on one connection, each already validated, until its end. What it holds
 * is bounded by `runBytesMax` (the run's frames together) and by the state limits a whole message has
 * (`SYNC_PART_LIMITS`: runtimes counted, and processes and threads per runtime), which no single frame shows.
 * The state limits alone admit far more than a replica can hold, so the bytes bound is what keeps a peer from
 * growing this one's memory without end. A connection takes its own assembler, so parts of two connections
 * never mix, and one cut mid-run takes its parts with it.
 */
export class PartsAssembler {
  readonly #runBytesMax: number;
  #run: Run | undefined;

  constructor(runBytesMax: number) {
    this.#runBytesMax = runBytesMax;
  }

  /** True between a run's first part and its end. */
  get pending(): boolean {
    return this.#run !== undefined;
  }

  /** Takes the next part, a frame of `bytes`; returns why it does not follow, dropping the run, worthless then. */
  add(part: SyncPart, bytes: number): string | undefined {
    const run = (this.#run ??= {
      term: part.term,
      epoch: part.epoch,
      parts: 0,
      bytes: 0,
      runtimes: [],
      ids: new Set(),
    });
    run.bytes += bytes;
    const tooBig = run.bytes > this.#runBytesMax ? `${RUN_TOO_BIG} (${this.#runBytesMax} bytes)` : undefined;
    const problem = tooBig ?? problemOf(run, part) ?? this.#take(run, part.runtimes);
    if (problem !== undefined) this.#run = undefined;
    else run.parts++;
    return problem;
  }

  /** The message the run and `end` make, and a fresh start either way. */
  finish(end: SyncRunEnd): Assembled {
    const run = this.#run;
    this.#run = undefined;
    if (!run) return { ok: false, error: `${end.type} with no part before it` };
    if (end.term !== run.term || end.epoch !== run.epoch) {
      return { ok: false, error: `${end.type} of term ${end.term} epoch ${end.epoch} ends the run of ${label(run)}` };
    }
    if (end.parts !== run.parts) return { ok: false, error: `${end.parts} parts announced, ${run.parts} came` };
    const { term, epoch, runtimes } = run;
    if (end.type === 'commit-end') {
      return {
        ok: true,
        msg: { type: 'commit', term, epoch, body: { kind: 'snapshot', snapshot: { epoch, term, runtimes } } },
      };
    }
    const { replica, version } = end;
    return { ok: true, msg: { type: 'collect', term, epoch, replica, version, part: { kind: 'full', runtimes } } };
  }

  /** Drops an unfinished run (its connection closed). */
  reset(): void {
    this.#run = undefined;
  }

  #take(run: Run, entries: readonly RuntimeState[]): string | undefined {
    for (const entry of entries) {
      const last = run.runtimes.at(-1);
      const problem = last?.runtime.id === entry.runtime.id ? continues(last, entry) : starts(run, entry);
      if (problem !== undefined) return problem;
    }
    return undefined;
  }
}

function problemOf(run: Run, part: SyncPart): string | undefined {
  if (part.part !== run.parts) return `part ${part.part} where part ${run.parts} was due`;
  if (part.term !== run.term || part.epoch !== run.epoch) {
    return `part of term ${part.term} epoch ${part.epoch} within the run of ${label(run)}`;
  }
  return undefined;
}

function starts(run: Run, entry: RuntimeState): string | undefined {
  if (run.ids.has(entry.runtime.id)) return `runtime ${entry.runtime.id} again after another`;
  if (run.runtimes.length >= SYNC_PART_LIMITS.runtimesMax) return `more than ${SYNC_PART_LIMITS.runtimesMax} runtimes`;
  run.ids.add(entry.runtime.id);
  run.runtimes.push(entry);
  return undefined;
}

/** Appends a continuing entry's lists to the runtime before it. */
function continues(last: RuntimeState, entry: RuntimeState): string | undefined {
  const id = entry.runtime.id;
  if (entry.processes.length + entry.threads.length === 0) return `runtime ${id} continued with nothing`;
  if (!isDeepStrictEqual(entry.runtime, last.runtime)) return `runtime ${id} continued with other fields`;
  if (last.processes.length + entry.processes.length > RUNTIME_LIMITS.processesMax) {
    return `runtime ${id} with more than ${RUNTIME_LIMITS.processesMax} processes`;
  }
  if (last.threads.length + entry.threads.length > RUNTIME_LIMITS.threadsMax) {
    return `runtime ${id} with more than ${RUNTIME_LIMITS.threadsMax} threads`;
  }
  // One at a time: spreading a list of hundreds of thousands into push() overflows the stack.
  for (const process of entry.processes) last.processes.push(process);
  for (const thread of entry.threads) last.threads.push(thread);
  return undefined;
}

const label = (run: Run): string => `term ${run.term} epoch ${run.epoch}`;
