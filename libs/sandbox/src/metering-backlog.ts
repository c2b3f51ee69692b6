import type { Clock, Timer } from '@switchyard/clock';

export interface WriteBacklogOptions<T> {
  /** Most items waiting (the batch being written is not counted); past it the oldest waiting are dropped. */
  readonly lengthMax: number;
  /** Most items sent in one write. */
  readonly batchMax: number;
  /** Whether a write may be sent now (the connection is ready); `wake()` says when it may again. */
  readonly canSend: () => boolean;
  /** Writes a batch, in order; rejects if it is not known to be written (a resend must be harmless). */
  readonly send: (batch: readonly T[]) => Promise<void>;
  /** Whether a write's failure is a refusal that no later attempt would change: its batch is dropped. */
  readonly refusedForGood: (error: unknown) => boolean;
  /** An item waiting was dropped to make room; `dropped` counts all so far. Once per item. */
  readonly onDropped: (dropped: number) => void;
  /** An item was refused for good and dropped. Once per item. */
  readonly onRefused: (error: unknown) => void;
  /** A write failed for a passing reason: its items are sent again. */
  readonly onDeferred: (error: unknown) => void;
  /** Pause after a write failed for a passing reason, unless a `wake()` ends it sooner. */
  readonly retryPauseMs: number;
  readonly clock: Clock;
}

/**
 * Items to be written, in order, one batch at a time: a batch that failed
 * for a passing reason goes back to the head and is sent again at the next
 * `wake()` or after a pause, so nothing recorded after it is written before
 * it. A batch refused for good is dropped whole: what refuses one item
 * (the key written to holds another type, a command not allowed) refuses
 * them all. Guarantees: bounded (`lengthMax` waiting, plus the batch in
 * flight), in order, each item sent until it is written or refused for
 * good. Not guaranteed: that a batch that failed was not written, in part
 * or whole (its resend must be harmless).
 */
export class WriteBacklog<T> {
  readonly #opts: WriteBacklogOptions<T>;
  #waiting: T[] = [];
  #inFlight: readonly T[] = [];
  #dropped = 0;
  #retry: Timer | undefined;
  #stopped = false;
  #onDrained: (() => void)[] = [];

  constructor(opts: WriteBacklogOptions<T>) {
    this.#opts = opts;
  }

  /** Items not yet written: waiting and in flight. */
  get size(): number {
    return this.#waiting.length + this.#inFlight.length;
  }

  push(item: T): void {
    if (this.#stopped) return;
    this.#waiting.push(item);
    this.#trim();
    this.#sendNext();
  }

  /** The connection is ready (again): send what waits now, without the pause after a failed write. */
  wake(): void {
    this.#retry?.cancel();
    this.#retry = undefined;
    this.#sendNext();
  }

  /** Resolves once nothing waits or is in flight. */
  drained(): Promise<void> {
    if (this.size === 0) return Promise.resolve();
    return new Promise((resolve) => this.#onDrained.push(resolve));
  }

  /** Sends nothing more, whatever a write in flight answers. */
  stop(): void {
    this.#stopped = true;
    this.#retry?.cancel();
    this.#retry = undefined;
  }

  #sendNext(): void {
    if (this.#stopped || this.#retry || this.#inFlight.length > 0 || this.#waiting.length === 0) return;
    if (!this.#opts.canSend()) return;
    const batch = this.#waiting.splice(0, this.#opts.batchMax);
    this.#inFlight = batch;
    this.#opts.send(batch).then(
      () => this.#settled(batch, undefined),
      (error: unknown) => this.#settled(batch, error ?? new Error('write failed')),
    );
  }

  #settled(batch: readonly T[], error: unknown): void {
    this.#inFlight = [];
    if (this.#stopped) return;
    if (error !== undefined && this.#opts.refusedForGood(error)) {
      for (let i = 0; i < batch.length; i++) this.#opts.onRefused(error);
    } else if (error !== undefined) {
      this.#waiting.unshift(...batch);
      this.#trim();
      this.#failedForNow(error);
    }
    if (this.size === 0) for (const resolve of this.#onDrained.splice(0)) resolve();
    this.#sendNext();
  }

  #failedForNow(error: unknown): void {
    this.#opts.onDeferred(error);
    this.#retry ??= this.#opts.clock.setTimeout(() => {
      this.#retry = undefined;
      this.#sendNext();
    }, this.#opts.retryPauseMs);
  }

  #trim(): void {
    while (this.#waiting.length > this.#opts.lengthMax) {
      this.#waiting.shift();
      this.#opts.onDropped(++this.#dropped);
    }
  }
}
