import type { ClusterOp, Runtime, RuntimeState, ScheduleDecision, ScheduleRequest } from '@switchyard/protocol';
import { ClusterIndex, schedule, type RuntimeSummary } from '@switchyard/scheduling';
import type { Clock } from '@switchyard/clock';
import type { EpochSink } from '@switchyard/epoch';

export interface ClusterViewOptions {
  readonly clock: Clock;
  /** How long an unreported placement is remembered. Default 30 s. */
  readonly pendingTtlMs?: number;
  /** Most unreported placements remembered; the oldest is forgotten first. Default 100,000. */
  readonly pendingMax?: number;
  /** Called after every applied commit. */
  readonly onCommit?: (epoch: number, term: number) => void;
  /** Called when epoch sync confirms the latest epoch is still the newest (no commit, nothing missed). */
  readonly onCurrent?: () => void;
}

/**
 * The replica's view of the cluster: the latest committed epoch as a
 * scheduling index, plus placements this replica decided that no epoch shows
 * yet. Schedules are answered from here and nowhere else, so two replicas on
 * the same epoch answer alike (pending placements aside, which only exist
 * between a decision and the next epoch).
 */
export class ClusterView implements EpochSink {
  #index = ClusterIndex.from([]);
  #epoch = -1;
  #term = 0;
  /** process id → runtime; insertion order is decision order, so expiry walks from the head. */
  readonly #pending = new Map<string, string>();
  /** process id → `Clock.monotonicNow()` reading at which it is forgotten. */
  readonly #pendingExpiresAt = new Map<string, number>();
  readonly #clock: Clock;
  readonly #pendingTtlMs: number;
  readonly #pendingMax: number;
  readonly #onCommit: ((epoch: number, term: number) => void) | undefined;
  readonly #onCurrent: (() => void) | undefined;

  constructor(options: ClusterViewOptions) {
    this.#clock = options.clock;
    this.#pendingTtlMs = options.pendingTtlMs ?? 30_000;
    this.#pendingMax = options.pendingMax ?? 100_000;
    this.#onCommit = options.onCommit;
    this.#onCurrent = options.onCurrent;
  }

  snapshot(epoch: number, term: number, states: readonly RuntimeState[]): void {
    this.#index = ClusterIndex.from(states);
    this.#committed(epoch, term);
  }

  delta(epoch: number, term: number, _baseEpoch: number, ops: readonly ClusterOp[]): void {
    this.#index.applyAll(ops);
    this.#committed(epoch, term);
  }

  current(epoch: number, term: number): void {
    if (epoch === this.#epoch && term === this.#term) this.#onCurrent?.();
  }

  /** True once any epoch was applied. */
  get hasEpoch(): boolean {
    return this.#epoch >= 0;
  }

  get epoch(): number {
    return this.#epoch;
  }

  get term(): number {
    return this.#term;
  }

  runtime(id: string): Runtime | undefined {
    return this.#index.runtime(id);
  }

  /**
   * The join token fingerprint of `id`'s tunnel when the latest epoch shows it live (available) at a
   * replica other than `self`: a connect for the id with another token is refused there. Undefined
   * when it shows none, one held by `self` (the endpoint knows its own tunnels), one no longer live
   * (its replica went silent, its runtime is lost or not yet synced), or one of a replica of an
   * earlier release (no fingerprint). A map lookup: called on every connect.
   */
  claimElsewhere(id: string, self: string): string | undefined {
    return this.#liveElsewhere(id, self)?.tokenFingerprint;
  }

  /**
   * The instance of the runtime process on `id`'s tunnel when the latest epoch shows it live (available) at
   * a replica other than `self`: a connect for the id naming another instance is refused there. Undefined
   * as for `claimElsewhere`, and for one reported without an instance (a runtime or replica of an earlier
   * release). A map lookup: called on every connect.
   */
  instanceElsewhere(id: string, self: string): string | undefined {
    return this.#liveElsewhere(id, self)?.instance;
  }

  runtimes(): readonly Runtime[] {
    return this.#index.runtimes();
  }

  /** One runtime's state, without building the others. */
  state(id: string): RuntimeState | undefined {
    return this.#index.state(id);
  }

  /** Every runtime with the sizes of what it holds (cheap: no lists). */
  summaries(): RuntimeSummary[] {
    return this.#index.summaries();
  }

  states(): RuntimeState[] {
    return this.#index.toStates();
  }

  counts(): { runtimes: number; processes: number; threads: number } {
    return this.#index.counts();
  }

  /** Decides a placement and remembers it until an epoch reports it; `explain` requests are dry runs. */
  schedule(request: ScheduleRequest): ScheduleDecision {
    this.#expirePending();
    const decision = schedule(this.#index, request, { pending: this.#pending });
    if (decision.ok && decision.source === 'pipeline' && request.explain !== true)
      this.#remember(request.processId, decision.runtime);
    return decision;
  }

  #liveElsewhere(id: string, self: string): Runtime | undefined {
    const runtime = this.#index.runtime(id);
    return runtime && runtime.owner !== self && runtime.available ? runtime : undefined;
  }

  #expirePending(): void {
    const now = this.#clock.monotonicNow();
    for (const [pid, expiresAt] of this.#pendingExpiresAt) {
      if (expiresAt > now && this.#pending.size <= this.#pendingMax) return;
      this.#forget(pid);
    }
  }

  #remember(processId: string, runtime: string): void {
    this.#forget(processId);
    this.#pending.set(processId, runtime);
    this.#pendingExpiresAt.set(processId, this.#clock.monotonicNow() + this.#pendingTtlMs);
  }

  #forget(processId: string): void {
    this.#pending.delete(processId);
    this.#pendingExpiresAt.delete(processId);
  }

  #committed(epoch: number, term: number): void {
    this.#epoch = epoch;
    this.#term = term;
    for (const [pid, runtime] of this.#pending) {
      if (this.#index.holdersOf(pid).includes(runtime)) this.#forget(pid);
    }
    this.#onCommit?.(epoch, term);
  }
}
