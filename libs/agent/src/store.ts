import { systemClock } from '@switchyard/clock';
import type { Clock, Timer } from '@switchyard/clock';
import {
  DRAINING_METADATA_KEY,
  RUNTIME_LIMITS,
  SwitchyardError,
  isIdentityValue,
  metadataSchema,
  parseWith,
  weightSchema,
} from '@switchyard/protocol';
import type { RuntimeOp, WatchSnapshot } from '@switchyard/protocol';
import { Coalescer } from './coalesce.ts';
import { ProcessTable, sortedRecord } from './state.ts';

/** One flushed, coalesced batch of changes. `seq` increases by exactly 1 per batch. */
export interface RuntimeBatch {
  readonly seq: number;
  readonly ops: readonly RuntimeOp[];
}

/** Receives each batch synchronously, in `seq` order, as it is flushed. */
export type BatchListener = (batch: RuntimeBatch) => void;

export interface RuntimeStateStoreOptions {
  /** Time source of the flush timer. Default: the system clock. */
  readonly clock?: Clock;
  /** How long changes gather before one batch is flushed. Default 5 ms. */
  readonly flushDelayMs?: number;
  /** Recent batches kept for `Last-Event-ID` resumes; older ones are evicted first. Default 1,000. */
  readonly historyBatchesMax?: number;
  /** Distinct keys changed within one flush window before an early flush. Default 10,000. */
  readonly pendingKeysMax?: number;
  /** Processes hosted at once; one more is refused with `capacity_exhausted`. Default 100,000. */
  readonly processesMax?: number;
  /** Threads hosted at once; one more is refused with `capacity_exhausted`. Default 1,000,000. */
  readonly threadsMax?: number;
  /** Subscribers at once; one more is refused with `capacity_exhausted`. Default 1,024. */
  readonly listenersMax?: number;
  /**
   * Sequence number of the state before the first batch. Default: `clock.now()`, so a
   * restarted runtime numbers above its previous life (at most one batch per flush delay,
   * i.e. fewer than one per millisecond) and stale `Last-Event-ID`s fall back to a snapshot.
   */
  readonly seqStart?: number;
  /** Called when a subscriber throws; the flush goes on. Default: rethrown on a later tick. */
  readonly onListenerError?: (error: unknown) => void;
}

/** Defaults of `RuntimeStateStore`, with units in the names. */
export const STORE_DEFAULTS = {
  flushDelayMs: 5,
  historyBatchesMax: 1_000,
  pendingKeysMax: 10_000,
  processesMax: 100_000,
  threadsMax: 1_000_000,
  listenersMax: 1_024,
} as const;

/**
 * A runtime's own state: processes, threads, idle weight and metadata, with a
 * change feed of coalesced batches.
 *
 * Guarantees: every mutator is idempotent (a no-op emits nothing); changes made
 * within `flushDelayMs` leave as ONE batch whose ops, applied in order to the
 * state at `seq - 1`, give the state at `seq` (an add and a remove of the same
 * key cancel; weight and metadata keep the last value); `snapshot()` is the
 * state at `seq`. Not guaranteed: the original interleaving of calls — a batch
 * lists thread removals, process removals, process additions, thread
 * additions, weight, metadata, each in first-touch order.
 */
export class RuntimeStateStore {
  readonly #clock: Clock;
  readonly #flushDelayMs: number;
  readonly #historyMax: number;
  readonly #pendingKeysMax: number;
  readonly #processesMax: number;
  readonly #threadsMax: number;
  readonly #listenersMax: number;
  readonly #onListenerError: (error: unknown) => void;
  readonly #table = new ProcessTable();
  readonly #coalescer = new Coalescer();
  readonly #listeners = new Set<BatchListener>();
  readonly #history: RuntimeBatch[] = [];
  #idleWeight: Record<string, number> = {};
  #metadata: Record<string, string> = {};
  #draining = false;
  #seq: number;
  #timer: Timer | undefined;
  #closed = false;

  constructor(options: RuntimeStateStoreOptions = {}) {
    this.#clock = options.clock ?? systemClock;
    this.#flushDelayMs = options.flushDelayMs ?? STORE_DEFAULTS.flushDelayMs;
    this.#historyMax = Math.max(1, options.historyBatchesMax ?? STORE_DEFAULTS.historyBatchesMax);
    this.#pendingKeysMax = Math.max(1, options.pendingKeysMax ?? STORE_DEFAULTS.pendingKeysMax);
    this.#processesMax = options.processesMax ?? STORE_DEFAULTS.processesMax;
    this.#threadsMax = options.threadsMax ?? STORE_DEFAULTS.threadsMax;
    this.#listenersMax = options.listenersMax ?? STORE_DEFAULTS.listenersMax;
    this.#onListenerError =
      options.onListenerError ??
      ((error) =>
        queueMicrotask(() => {
          throw error;
        }));
    // Wall clock: the numbering must stay above a previous life's, which no monotonic reading spans.
    this.#seq = options.seqStart ?? this.#clock.now();
  }

  /** Sequence number of the last flushed batch (or `seqStart`). */
  get seq(): number {
    return this.#seq;
  }

  /** Processes and threads held now: the entries a snapshot lists. */
  get entryCount(): number {
    return this.#table.processCount + this.#table.threadCount;
  }

  /** True after `close()`: the state is readable, the feed takes no subscriber. */
  get closed(): boolean {
    return this.#closed;
  }

  /** Adds a process. Returns false (and emits nothing) when it exists. Throws `bad_identity`, `capacity_exhausted`. */
  addProcess(pid: string): boolean {
    checkId('process', pid);
    if (this.#table.hasProcess(pid)) return false;
    if (this.#table.processCount >= this.#processesMax) throw full('processes', this.#processesMax);
    this.#coalescer.touchProcess(pid, false);
    this.#table.addProcess(pid);
    this.#changed();
    return true;
  }

  /** Removes a process and its threads. Returns false when it was absent. */
  removeProcess(pid: string): boolean {
    checkId('process', pid);
    if (!this.#table.hasProcess(pid)) return false;
    this.#coalescer.touchProcess(pid, true);
    for (const tid of this.#table.threadsOf(pid)) this.#coalescer.touchThread(pid, tid, true);
    this.#table.removeProcess(pid);
    this.#changed();
    return true;
  }

  /** Adds a thread, and its process when absent. Returns false when the thread exists. */
  addThread(pid: string, tid: string): boolean {
    checkId('process', pid);
    checkId('thread', tid);
    if (this.#table.hasThread(pid, tid)) return false;
    const newProcess = !this.#table.hasProcess(pid);
    if (newProcess && this.#table.processCount >= this.#processesMax) throw full('processes', this.#processesMax);
    if (this.#table.threadCount >= this.#threadsMax) throw full('threads', this.#threadsMax);
    if (newProcess) this.#coalescer.touchProcess(pid, false);
    this.#coalescer.touchThread(pid, tid, false);
    this.#table.addThread(pid, tid);
    this.#changed();
    return true;
  }

  /** Removes a thread; its process stays. Returns false when it was absent. */
  removeThread(pid: string, tid: string): boolean {
    checkId('process', pid);
    checkId('thread', tid);
    if (!this.#table.hasThread(pid, tid)) return false;
    this.#coalescer.touchThread(pid, tid, true);
    this.#table.removeThread(pid, tid);
    this.#changed();
    return true;
  }

  /**
   * Replaces the whole idle weight (e.g. `{sandboxes: limit - active}`);
   * once draining, every dimension of it is reported as 0. Throws
   * `invalid_request` on a bad value.
   */
  setIdleWeight(weight: Record<string, number>): boolean {
    const parsed = parseWith(weightSchema, weight);
    if (!parsed.ok) throw new SwitchyardError('invalid_request', `idleWeight ${parsed.error}`);
    return this.#reportWeight(parsed.value);
  }

  /**
   * Reports no idle weight from now on: every dimension is 0, so schedulers
   * place no new process here, while processes held here keep their sessions
   * (a saturated holder stays schedulable for them). The metadata says so
   * (`DRAINING_METADATA_KEY`), telling this runtime from a full one. For a
   * runtime on its way out. Idempotent.
   */
  drain(): void {
    this.#draining = true;
    this.#reportWeight(this.#idleWeight);
    this.#reportMetadata(this.#metadata);
  }

  /**
   * Replaces the whole metadata, but for the reserved `DRAINING_METADATA_KEY`,
   * which only `drain()` sets. Throws `invalid_request` on a bad value.
   */
  setMetadata(metadata: Record<string, string>): boolean {
    const parsed = parseWith(metadataSchema, metadata);
    if (!parsed.ok) throw new SwitchyardError('invalid_request', `metadata ${parsed.error}`);
    return this.#reportMetadata(parsed.value);
  }

  /**
   * The state at `seq`, in canonical order (ids sorted). Flushes pending
   * changes first, so the snapshot and `seq` always agree.
   */
  snapshot(): WatchSnapshot {
    this.flush();
    return { ...this.#table.canonical(), idleWeight: { ...this.#idleWeight }, metadata: { ...this.#metadata } };
  }

  /**
   * Batches after `lastSeq`, oldest first: empty when `lastSeq` is current,
   * `undefined` when they are no longer (or never were) in the history.
   */
  batchesSince(lastSeq: number): readonly RuntimeBatch[] | undefined {
    if (!Number.isSafeInteger(lastSeq) || lastSeq > this.#seq) return undefined;
    if (lastSeq === this.#seq) return [];
    const oldest = this.#history[0];
    if (!oldest || lastSeq + 1 < oldest.seq) return undefined;
    return this.#history.slice(lastSeq + 1 - oldest.seq);
  }

  /** Calls `listener` with every batch flushed from now on. Returns the unsubscribe function. */
  subscribe(listener: BatchListener): () => void {
    if (this.#closed) throw new SwitchyardError('not_ready', 'state store is closed');
    if (this.#listeners.size >= this.#listenersMax) throw full('listeners', this.#listenersMax);
    const entry: BatchListener = (batch) => listener(batch);
    this.#listeners.add(entry);
    return () => void this.#listeners.delete(entry);
  }

  /** Emits pending changes now as one batch (nothing when they cancelled out). */
  flush(): void {
    this.#timer?.cancel();
    this.#timer = undefined;
    const ops = this.#coalescer.drain(this.#table, this.#idleWeight, this.#metadata);
    if (ops.length === 0) return;
    const batch: RuntimeBatch = { seq: ++this.#seq, ops };
    this.#history.push(batch);
    if (this.#history.length > this.#historyMax) this.#history.shift();
    for (const listener of [...this.#listeners]) {
      // A faulty subscriber must not keep the batch from the others.
      try {
        listener(batch);
      } catch (error) {
        this.#onListenerError(error);
      }
    }
  }

  /** Flushes what is pending and drops every subscriber. Idempotent; the state stays readable. */
  close(): void {
    if (this.#closed) return;
    this.flush();
    this.#closed = true;
    this.#listeners.clear();
  }

  #reportWeight(weight: Record<string, number>): boolean {
    const next = sortedRecord(this.#draining ? noIdleWeight(weight) : weight);
    if (sameRecord(next, this.#idleWeight)) return false;
    this.#coalescer.touchWeight(this.#idleWeight);
    this.#idleWeight = next;
    this.#changed();
    return true;
  }

  #reportMetadata(metadata: Record<string, string>): boolean {
    const next = sortedRecord(this.#draining ? markedDraining(metadata) : withoutDrainingMark(metadata));
    if (sameRecord(next, this.#metadata)) return false;
    this.#coalescer.touchMetadata(this.#metadata);
    this.#metadata = next;
    this.#changed();
    return true;
  }

  #changed(): void {
    if (this.#closed) return;
    if (this.#coalescer.size >= this.#pendingKeysMax) return this.flush();
    this.#timer ??= this.#clock.setTimeout(() => {
      this.#timer = undefined;
      this.flush();
    }, this.#flushDelayMs);
  }
}

function checkId(field: string, value: unknown): asserts value is string {
  if (!isIdentityValue(value)) {
    throw new SwitchyardError('bad_identity', `${field}: must be 1-128 characters from [A-Za-z0-9._:@-]`);
  }
}

function full(what: string, max: number): SwitchyardError {
  return new SwitchyardError('capacity_exhausted', `at most ${max} ${what}`);
}

function sameRecord(a: Record<string, unknown>, b: Record<string, unknown>): boolean {
  const keys = Object.keys(a);
  return keys.length === Object.keys(b).length && keys.every((k) => Object.hasOwn(b, k) && a[k] === b[k]);
}

/** `metadata` without the reserved draining mark. */
function withoutDrainingMark(metadata: Record<string, string>): Record<string, string> {
  const { [DRAINING_METADATA_KEY]: _mark, ...own } = metadata;
  return own;
}

/** `metadata` with the draining mark, where there is room for it. */
function markedDraining(metadata: Record<string, string>): Record<string, string> {
  const own = withoutDrainingMark(metadata);
  // One entry more would be refused by every scheduler; the zero idle weight
  // alone still keeps new sandboxes away.
  if (Object.keys(own).length >= RUNTIME_LIMITS.metadataEntriesMax) return own;
  return { ...own, [DRAINING_METADATA_KEY]: 'true' };
}

/** `weight` with every dimension 0; a weight of no dimension counts as open, so it becomes `{sandboxes: 0}`. */
function noIdleWeight(weight: Record<string, number>): Record<string, number> {
  const keys = Object.keys(weight);
  return Object.fromEntries((keys.length > 0 ? keys : ['sandboxes']).map((key) => [key, 0]));
}
