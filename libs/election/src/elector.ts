import { sleep } from '@switchyard/clock';
import type { Clock, Timer } from '@switchyard/clock';
import { SwitchyardError, TERM_MAX } from '@switchyard/protocol';
import { isLeaseConflict } from './errors.ts';
import type { LeaseLock, LeaseRecord } from './lock.ts';
import { resolveTiming } from './settings.ts';
import type { ElectionTiming } from './settings.ts';

/** The step-down reason of stop(): the one way out of leadership that is not a fault. */
const STOPPED_REASON = 'elector stopped';

/** What leader work receives: its term, and a signal aborted the moment leadership ends. */
export interface LeadershipContext {
  readonly term: number;
  readonly signal: AbortSignal;
}

/** pino-compatible subset. */
export interface ElectionLogger {
  info(fields: object, message: string): void;
  warn(fields: object, message: string): void;
}

export interface LeaderElectorOptions extends Partial<ElectionTiming> {
  readonly lock: LeaseLock;
  /** This replica's holder identity, usually `formatHolder({id, address})`. */
  readonly identity: string;
  readonly clock: Clock;
  /** Source of jitter in [0, 1). Default `Math.random`; inject for reproducible tests. */
  readonly random?: () => number;
  /** Called on becoming leader. Stop the work when `ctx.signal` aborts. */
  readonly onStartedLeading?: (ctx: LeadershipContext) => void | Promise<void>;
  /** Called after the signal aborted, whatever the reason (lost renewal or `stop()`). */
  readonly onStoppedLeading?: () => void;
  /** Called when the observed holder or term changes (this replica included; `undefined` = lease free). */
  readonly onNewLeader?: (holder: string | undefined, term: number) => void;
  readonly logger?: ElectionLogger;
}

/**
 * Leader election over a `LeaseLock`, with client-go `leaderelection`
 * semantics.
 *
 * A candidate tries every `retryPeriodMs` (jittered), and also the moment
 * the lease it saw held by another would expire, and takes the lease when
 * it is free, ours, or expired: `leaseDurationSeconds` have passed on
 * the LOCAL monotonic clock since we observed the record last change. The term is
 * `leaseTransitions`, incremented whenever a leadership begins (unlike
 * client-go, also when we retake our own stale lease, so every
 * `onStartedLeading` sees a term larger than any before it), or raised past
 * a term `termExists` reported. A leader renews every `retryPeriodMs`; if no
 * renewal that STARTED within the last `renewDeadlineMs` succeeded, or a
 * renewal reads the lease held by another (deleted and created again, say),
 * it stops leading — the signal aborts at once, before the new holder is
 * reported — and goes on as a candidate. It never exits the process.
 *
 * Guarantee, given the assumptions below: two electors sharing a lease never
 * report `isLeader` at the same time. A leader's claim ends at
 * `attemptStart + renewDeadlineMs` of its last successful renewal, while
 * others wait `leaseDuration` from when they observed that write, which
 * happened after the attempt started; a write that raced is a 409.
 *
 * NOT guaranteed (as in client-go): safety under clock RATE skew between
 * replicas larger than `leaseDuration / renewDeadline` allows, or a process
 * paused (GC, SIGSTOP) between checking leadership and acting on it — leader
 * work must fence its writes with the term. Absolute clock offsets do not
 * matter: nobody compares another replica's timestamps with its own clock.
 * Nor do steps of a wall clock (NTP, an operator): every duration here is
 * measured on `Clock.monotonicNow()`; the wall clock only dates the lease.
 * `onNewLeader` reports what this replica observed, which may lag. A lease
 * deleted under a leader is taken at once by whoever creates it again: the
 * two overlap until the old leader's next renewal reads it (about one
 * `retryPeriodMs`), the new one at a higher term. A lease
 * deleted and created again by an elector that never read it starts over at
 * term 0: one elector never leads twice at a term, but another may lead at
 * a term used before until `termExists` has raised it past the old ones.
 *
 * An elector is single-use: `start()` once, `stop()` once (idempotent).
 */
export class LeaderElector {
  readonly #lock: LeaseLock;
  readonly #identity: string;
  readonly #clock: Clock;
  readonly #random: () => number;
  readonly #timing: ElectionTiming;
  readonly #options: LeaderElectorOptions;
  readonly #stopController = new AbortController();
  #loop: Promise<void> | undefined;
  #stopped: Promise<void> | undefined;
  #attemptSeq = 0;
  #observed: LeaseRecord | undefined;
  #observedMonoMs = 0;
  #reported: { holder: string | undefined; term: number } | undefined;
  /** Lowest term our next leadership may take: above every term we led or were told exists (`termExists`). */
  #termFloor = 0;
  #leadership: { term: number; controller: AbortController; deadline: Timer | undefined } | undefined;

  /** Throws `SwitchyardError(invalid_request)` when the timing is inconsistent (see `resolveTiming`). */
  constructor(options: LeaderElectorOptions) {
    this.#timing = resolveTiming(options);
    if (options.identity === '') throw new SwitchyardError('invalid_request', 'elector identity must be non-empty');
    this.#options = options;
    this.#lock = options.lock;
    this.#identity = options.identity;
    this.#clock = options.clock;
    this.#random = options.random ?? Math.random;
  }

  /** True while this replica may act as leader. Checked synchronously; fence long work with the term. */
  get isLeader(): boolean {
    return this.#leadership !== undefined;
  }

  /** The term of the current leadership, or `undefined` when not leading. */
  get term(): number | undefined {
    return this.#leadership?.term;
  }

  /** The holder and term last observed on the lease; `undefined` when it is free or unread. */
  get leader(): { holder: string; term: number } | undefined {
    const holder = this.#observed?.holderIdentity;
    return holder === undefined ? undefined : { holder, term: this.#observed!.leaseTransitions };
  }

  /**
   * Tells the elector that a leadership of `term` exists or existed, e.g. a
   * follower fenced our messages off because it saw that term: the lease was
   * deleted and created again below it by a replica that had never read it.
   * A leader at `term` or below steps down at once (its signal aborts), and
   * the next leadership this elector takes, its own lease included, is at a
   * term above `term`. Other electors learn nothing from it: they go on from
   * the lease, which then carries the higher term. Idempotent; a lower `term`
   * than before changes nothing. A `term` of `TERM_MAX` or above is ignored
   * (and logged): no Lease can carry a term above it, so this elector could
   * never lead again, and stepping down would hand the lease to electors
   * that cannot lead above it either. No leader held such a term: whoever
   * claims it is broken or hostile.
   */
  termExists(term: number): void {
    if (term >= TERM_MAX) {
      this.#options.logger?.warn({ term, termMax: TERM_MAX }, 'ignored a term no lease can be taken above');
      return;
    }
    this.#termFloor = Math.max(this.#termFloor, term + 1);
    if (this.#leadership && this.#leadership.term <= term) this.#stepDown(`term ${term} was seen elsewhere`);
  }

  /** Starts the acquire/renew loop. Calling it again, or after `stop()`, does nothing. */
  start(): void {
    if (this.#loop || this.#stopped) return;
    this.#loop = this.#run();
  }

  /**
   * Stops the loop; a leader aborts its signal and releases the lease (holder
   * cleared, `leaseDurationSeconds` 1) so a successor takes it on its next
   * attempt. Idempotent; resolves once done. A failed release is logged, not thrown.
   */
  stop(): Promise<void> {
    this.#stopped ??= this.#shutdown();
    return this.#stopped;
  }

  async #shutdown(): Promise<void> {
    this.#stopController.abort(new SwitchyardError('not_ready', STOPPED_REASON));
    await this.#loop;
    const wasLeading = this.#leadership !== undefined;
    this.#stepDown(STOPPED_REASON);
    if (wasLeading) await this.#release();
  }

  async #run(): Promise<void> {
    const { retryPeriodMs, jitterFactor } = this.#timing;
    const signal = this.#stopController.signal;
    while (!signal.aborted) {
      await this.#attempt();
      const jitteredMs = retryPeriodMs * (1 + this.#random() * jitterFactor);
      const waitMs = this.#leadership ? retryPeriodMs : Math.min(jitteredMs, this.#untilOthersExpiryMs() ?? jitteredMs);
      try {
        await sleep(this.#clock, waitMs, signal);
      } catch {
        return;
      }
    }
  }

  async #attempt(): Promise<void> {
    const seq = ++this.#attemptSeq;
    // The wall clock goes into the lease for others to read; the deadline is ours alone, on the monotonic clock.
    const startedAtMs = this.#clock.now();
    const startedMonoMs = this.#clock.monotonicNow();
    const leadershipAtStart = this.#leadership;
    let won: LeaseRecord | undefined;
    try {
      won = await this.#bounded(this.#tryAcquireOrRenew(seq, startedAtMs));
    } catch (error) {
      if (!this.#stopController.signal.aborted) this.#logFailure(error);
    }
    // An attempt that was abandoned (timeout or stop) must not touch state when it settles late.
    this.#attemptSeq++;
    if (this.#stopController.signal.aborted) return;
    // A renewal that outlived the leadership it renewed does not revive it: the next attempt
    // retakes the lease with a new term, so a term never spans two leaderships.
    if (leadershipAtStart && this.#leadership !== leadershipAtStart) return;
    const validUntilMonoMs = startedMonoMs + this.#timing.renewDeadlineMs;
    if (won && this.#clock.monotonicNow() < validUntilMonoMs) this.#renewed(won, validUntilMonoMs);
  }

  /**
   * One client-go `tryAcquireOrRenew`: the record we stored, or `undefined` when the lease is someone else's.
   * `startedAtMs` (wall clock) is only written into the lease.
   */
  async #tryAcquireOrRenew(seq: number, startedAtMs: number): Promise<LeaseRecord | undefined> {
    const leaseDurationSeconds = Math.max(1, Math.ceil(this.#timing.leaseDurationMs / 1000));
    const current = await this.#lock.get();
    if (seq !== this.#attemptSeq) return undefined;
    if (current === undefined) {
      const at = new Date(startedAtMs);
      const fresh = { holderIdentity: this.#identity, leaseDurationSeconds, acquireTime: at, renewTime: at };
      // A lease deleted under us (not only a first start) must not restart terms at 0: followers fence off every
      // term below the highest they saw. A leader keeps its term; a candidate goes past the last one it observed,
      // and past any it led or was told of (#nextTerm).
      const leaseTransitions = this.#leadership?.term ?? this.#nextTerm(this.#observed);
      return this.#stored(seq, await this.#lock.create({ ...fresh, leaseTransitions }));
    }
    const other = current.holderIdentity !== undefined && current.holderIdentity !== this.#identity;
    // Another holder wrote the lease (it was deleted and created again, or our claim was outlived): it is not
    // ours, whatever our renew deadline says. Ended before the new holder is reported, so that no one acts on
    // it (a follower dialling that holder) while this replica still leads. client-go's IsLeader turns false here.
    if (other && this.#leadership) this.#stepDown(`lease held by ${current.holderIdentity}`);
    this.#observe(current);
    if (other && this.#observedMonoMs + current.leaseDurationSeconds * 1000 > this.#clock.monotonicNow()) {
      return undefined;
    }
    const keep = !other && current.holderIdentity !== undefined && this.#leadership !== undefined;
    const next: LeaseRecord = {
      holderIdentity: this.#identity,
      leaseDurationSeconds,
      acquireTime: keep ? current.acquireTime : new Date(startedAtMs),
      renewTime: new Date(startedAtMs),
      leaseTransitions: keep ? current.leaseTransitions : this.#nextTerm(current),
      ...(current.resourceVersion === undefined ? {} : { resourceVersion: current.resourceVersion }),
    };
    return this.#stored(seq, await this.#lock.update(next));
  }

  /**
   * The term of a new leadership: past the lease we last read (0 if none) and past any term we were told exists.
   * Throws rather than return one past `TERM_MAX`, which a Kubernetes Lease refuses.
   */
  #nextTerm(last: LeaseRecord | undefined): number {
    const term = Math.max(last ? last.leaseTransitions + 1 : 0, this.#termFloor);
    if (term > TERM_MAX) throw new SwitchyardError('internal', `no term left above ${TERM_MAX} to lead at`);
    return term;
  }

  #stored(seq: number, record: LeaseRecord): LeaseRecord | undefined {
    if (seq !== this.#attemptSeq) return undefined;
    this.#observe(record);
    return record;
  }

  /**
   * Time left until the lease another replica holds expires in our eyes, when
   * that comes before the next jittered attempt: waking then, instead of up
   * to a jittered period later, takes a dead leader's lease as soon as it
   * may be taken. Undefined when nobody else holds it or it already expired
   * (then the jittered pace applies, so a failing API is not hammered).
   */
  #untilOthersExpiryMs(): number | undefined {
    const holder = this.#observed?.holderIdentity;
    if (holder === undefined || holder === this.#identity) return undefined;
    const leftMs = this.#observedMonoMs + this.#observed!.leaseDurationSeconds * 1000 - this.#clock.monotonicNow();
    return leftMs > 0 ? leftMs : undefined;
  }

  /**
   * Remembers when the record last CHANGED in our eyes, on the monotonic clock: expiry counts from there,
   * never from its timestamps nor on a wall clock that NTP may step past a live leader's lease.
   */
  #observe(record: LeaseRecord): void {
    if (!this.#observed || !sameRecord(this.#observed, record)) {
      this.#observed = record;
      this.#observedMonoMs = this.#clock.monotonicNow();
    }
    const holder = record.holderIdentity;
    const term = record.leaseTransitions;
    if (!this.#reported || this.#reported.holder !== holder || this.#reported.term !== term) {
      this.#reported = { holder, term };
      this.#callback('onNewLeader', () => this.#options.onNewLeader?.(holder, term));
    }
  }

  #renewed(record: LeaseRecord, validUntilMonoMs: number): void {
    if (!this.#leadership) {
      const controller = new AbortController();
      this.#leadership = { term: record.leaseTransitions, controller, deadline: undefined };
      // A lease deleted and created again below this term must not give it to us a second time.
      this.#termFloor = Math.max(this.#termFloor, record.leaseTransitions + 1);
      this.#options.logger?.info({ term: record.leaseTransitions, lock: this.#lock.describe() }, 'started leading');
      const ctx: LeadershipContext = { term: record.leaseTransitions, signal: controller.signal };
      this.#callback('onStartedLeading', () => this.#options.onStartedLeading?.(ctx));
    }
    const leadership = this.#leadership;
    // The callback may have called stop(); only arm the deadline for a leadership still held.
    if (!leadership) return;
    leadership.deadline?.cancel();
    leadership.deadline = this.#clock.setTimeout(
      () => this.#stepDown('renew deadline passed'),
      validUntilMonoMs - this.#clock.monotonicNow(),
    );
  }

  #stepDown(reason: string): void {
    const leadership = this.#leadership;
    if (!leadership) return;
    this.#leadership = undefined;
    leadership.deadline?.cancel();
    // Our own stop() is the expected way out; anything else is worth a warning.
    const fields = { term: leadership.term, reason };
    if (reason === STOPPED_REASON) this.#options.logger?.info(fields, 'stopped leading');
    else this.#options.logger?.warn(fields, 'stopped leading');
    leadership.controller.abort(new SwitchyardError('not_ready', `leadership lost: ${reason}`));
    this.#callback('onStoppedLeading', () => this.#options.onStoppedLeading?.());
  }

  /** client-go's release: clear the holder and shorten the lease so a successor need not wait it out. */
  async #release(): Promise<void> {
    // A renewal cut short by stop() may still have landed, leaving our
    // observed resourceVersion stale: on a conflict, re-read once and retry
    // while the lease is still ours, so a successor need not wait for expiry.
    for (let attempt = 0; attempt < 2; attempt++) {
      const observed =
        attempt === 0 ? this.#observed : await this.#bounded(this.#lock.get(), false).catch(() => undefined);
      if (!observed || observed.holderIdentity !== this.#identity) return;
      const now = new Date(this.#clock.now());
      const released: LeaseRecord = {
        ...observed,
        holderIdentity: undefined,
        leaseDurationSeconds: 1,
        acquireTime: now,
        renewTime: now,
      };
      try {
        this.#observe(await this.#bounded(this.#lock.update(released), false));
        return;
      } catch (error) {
        if (!isLeaseConflict(error) || attempt === 1) return this.#logFailure(error);
      }
    }
  }

  /** Bounds a lock call by `attemptTimeoutMs` on the clock, and by `stop()` unless `stoppable` is false. */
  #bounded<T>(work: Promise<T>, stoppable = true): Promise<T> {
    const signal = stoppable ? this.#stopController.signal : undefined;
    return new Promise<T>((resolve, reject) => {
      const onStop = (): void => finish(() => reject(signal!.reason));
      const timer = this.#clock.setTimeout(
        () => finish(() => reject(new SwitchyardError('upstream_timeout', 'lease call timed out'))),
        this.#timing.attemptTimeoutMs,
      );
      const finish = (settle: () => void): void => {
        timer.cancel();
        signal?.removeEventListener('abort', onStop);
        settle();
      };
      if (signal?.aborted) return onStop();
      signal?.addEventListener('abort', onStop, { once: true });
      work.then(
        (value) => finish(() => resolve(value)),
        (error: unknown) => finish(() => reject(error)),
      );
    });
  }

  #logFailure(error: unknown): void {
    if (isLeaseConflict(error)) {
      this.#options.logger?.info({ lock: this.#lock.describe() }, 'lease write lost a race');
    } else {
      this.#options.logger?.warn({ lock: this.#lock.describe(), err: error }, 'lease attempt failed');
    }
  }

  /** User callbacks never break the loop: a throw or rejection is logged. */
  #callback(name: string, run: () => void | Promise<void>): void {
    try {
      const result = run();
      if (result instanceof Promise) result.catch((error: unknown) => this.#callbackFailed(name, error));
    } catch (error) {
      this.#callbackFailed(name, error);
    }
  }

  #callbackFailed(name: string, error: unknown): void {
    this.#options.logger?.warn({ callback: name, err: error }, 'election callback failed');
  }
}

function sameRecord(a: LeaseRecord, b: LeaseRecord): boolean {
  if (a.resourceVersion !== undefined || b.resourceVersion !== undefined)
    return a.resourceVersion === b.resourceVersion;
  return (
    a.holderIdentity === b.holderIdentity &&
    a.leaseTransitions === b.leaseTransitions &&
    a.leaseDurationSeconds === b.leaseDurationSeconds &&
    a.renewTime.getTime() === b.renewTime.getTime()
  );
}
