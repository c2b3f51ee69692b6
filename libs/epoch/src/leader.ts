import type { Clock, Timer } from '@switchyard/clock';
import type { ClusterOp, RuntimeState, SyncMessage } from '@switchyard/protocol';
import { messageBytes } from './encode.ts';
import { EpochHistory } from './history.ts';
import { EPOCH_DEFAULTS, checkInt } from './options.ts';
import { effectivePart, makeRoom, newSlot } from './slots.ts';
import type { FollowerSlot } from './slots.ts';
import type {
  ApplyFn,
  CatchUpInfo,
  DiffFn,
  EpochRef,
  EpochSink,
  MergeFn,
  SnapshotInfo,
  SnapshotReason,
  SyncConnection,
} from './types.ts';

/** Reported after each new epoch. `bytes` is the size of the delta commit (the snapshot for the first epoch). */
export interface CommitInfo {
  readonly epoch: number;
  readonly term: number;
  readonly bytes: number;
  /** From the announce of the oldest cycle this commit concludes to the commit. */
  readonly durationMs: number;
}

export interface EpochLeaderOptions {
  readonly replicaId: string;
  /** Leadership term (the lease's transition count); every message carries it. */
  readonly term: number;
  readonly clock: Clock;
  /** The leader's own part. Must return a value that is not mutated afterwards. */
  readonly localPart: () => readonly RuntimeState[];
  readonly merge: MergeFn;
  readonly diff: DiffFn;
  /** Applies a follower's part delta to its previous part. */
  readonly apply: ApplyFn;
  /** The leader's own view of the commits. */
  readonly sink?: EpochSink;
  readonly cycleIntervalMs?: number;
  readonly debounceMs?: number;
  readonly cycleTimeoutMs?: number;
  readonly maxInFlight?: number;
  readonly keepEpochs?: number;
  readonly staleAfterMs?: number;
  readonly forgetAfterMs?: number;
  readonly followersMax?: number;
  /** Highest epoch number seen before this term; the first commit is `startEpoch + 1`. Default 0. */
  readonly startEpoch?: number;
  /**
   * Parts of other replicas as the last epoch before this term showed them
   * (replica id → its runtimes). Each becomes the part of a detached
   * follower until that follower reports, and goes stale like any silent
   * part — so a new leader's first epochs do not drop the runtimes of
   * followers that have not reconnected yet. Default: none.
   */
  readonly seedParts?: ReadonlyMap<string, readonly RuntimeState[]>;
  readonly onCommit?: (info: CommitInfo) => void;
  /** A follower's connection took a snapshot (the latest epoch, whole), with why it needed one. */
  readonly onSnapshotSent?: (info: SnapshotInfo) => void;
  /**
   * A follower's connection took one delta from the epoch it took last to the latest, after it missed epochs while
   * it was busy (a snapshot instead goes to `onSnapshotSent` as `behind` or `oversized`). Not called for the delta
   * of each commit, which every follower that holds the epoch before it gets.
   */
  readonly onCatchUpSent?: (info: CatchUpInfo) => void;
  /**
   * A follower sent `error` (e.g. it fenced this leader off: `term` above ours). `latestEpoch` is the
   * follower's latest epoch when it says (followers before this field do not).
   */
  readonly onFollowerError?: (replica: string, term: number, reason: string, latestEpoch?: number) => void;
  /** A follower detached for `forgetAfterMs` was forgotten, with the runtimes of its last part. */
  readonly onFollowerForgotten?: (replica: string, runtimes: number) => void;
}

interface Cycle {
  readonly token: number;
  readonly startedMs: number;
  readonly waiting: Set<string>;
  readonly timer: Timer;
}

/**
 * Leader side of epoch sync for one term. Each cycle announces to the
 * attached followers, waits for their collects (at most `cycleTimeoutMs`),
 * merges their parts with its own and commits the result as the next epoch.
 *
 * Guarantees:
 * - epochs are numbered `startEpoch + 1, +2, …` without holes; every
 *   follower gets, for one epoch number, either the same delta against the
 *   previous epoch, a delta against the epoch it took last (catching up),
 *   or a snapshot equal to that epoch's state;
 * - a cycle whose merge equals the previous epoch commits nothing (no new
 *   number for no change); followers waiting for a snapshot get the latest
 *   epoch's instead;
 * - a follower silent for `staleAfterMs` has its runtimes committed with
 *   `available: false` (attached or not) until it reports again, and one
 *   detached for `forgetAfterMs` is forgotten, its runtimes with it;
 * - a follower whose connection refuses a delta but takes the snapshot
 *   (the delta is above its frame limit or of more than `SYNC_OPS_MAX`
 *   ops) gets that snapshot at once (`oversized`);
 * - a follower whose connection refuses both (backpressure) gets nothing
 *   more until it takes messages again, then, before any further announce
 *   (which tells it its epoch is current), one delta from the epoch it took
 *   last to the latest. It gets a snapshot instead (`behind`) when the
 *   last `keepEpochs` epochs no longer hold that epoch, or when the delta
 *   has as many ops as the latest state has entries (runtimes, processes
 *   and threads: each op carries about what an entry does), and
 *   (`oversized`) when its connection refuses that delta for its size;
 * - every snapshot a follower's connection takes is reported to
 *   `onSnapshotSent` with why it needed one, and for `behind`, how many
 *   such it got since it last took a delta; every catch-up delta it takes,
 *   to `onCatchUpSent`, and no other delta;
 * - a follower whose connection is `backlogged` (a snapshot still going
 *   out to it in parts) is announced to, but no cycle waits for its answer;
 * - at most `maxInFlight` cycles wait at once; a collect that answers a
 *   later cycle also answers the earlier ones, which commit together.
 *
 * Not guaranteed: that a follower ever catches up (a dead one just goes
 * stale), or anything across terms — fencing is the followers' job.
 * The leader owns attached connections and closes them on `stop()`.
 */
export class EpochLeader {
  readonly #o: Required<
    Omit<
      EpochLeaderOptions,
      'sink' | 'onCommit' | 'onSnapshotSent' | 'onCatchUpSent' | 'onFollowerError' | 'onFollowerForgotten' | 'seedParts'
    >
  > &
    EpochLeaderOptions;
  readonly #history: EpochHistory;
  readonly #slots = new Map<string, FollowerSlot>();
  #cycles: Cycle[] = [];
  #token: number;
  #tick: Timer | undefined;
  #debounce: Timer | undefined;
  #promptPending = false;
  #stopped = false;
  #snapshotMsg: Commit | undefined;
  /** The latest epoch's delta commit against the one before it, when it was committed as one. */
  #lastDelta: { readonly msg: Commit; readonly baseEpoch: number; readonly ops: ClusterOp[] } | undefined;
  /** Deltas to the latest epoch by the epoch they start from (undefined: none worth sending), built once each. */
  #catchUps: { readonly epoch: number; readonly byBase: Map<number, Commit | undefined> } | undefined;

  constructor(options: EpochLeaderOptions) {
    this.#o = { ...EPOCH_DEFAULTS, startEpoch: 0, ...options };
    for (const key of [
      'cycleIntervalMs',
      'debounceMs',
      'cycleTimeoutMs',
      'staleAfterMs',
      'forgetAfterMs',
      'term',
      'startEpoch',
    ] as const) {
      checkInt(key, this.#o[key], 0);
    }
    checkInt('maxInFlight', this.#o.maxInFlight, 1);
    checkInt('followersMax', this.#o.followersMax, 1);
    this.#history = new EpochHistory(this.#o.keepEpochs);
    this.#token = this.#o.startEpoch;
    this.#seed(this.#o.seedParts);
    this.#armTick();
    // The first epoch of a term goes out after the debounce, not on the first
    // tick: until it commits, every replica still answers with the previous
    // term's state, including the runtimes of a leader that died.
    this.notifyChange();
  }

  /** Number of cycles announced and not yet committed. */
  get inFlight(): number {
    return this.#cycles.length;
  }

  /** The newest committed epoch, undefined before the first commit. */
  latest(): EpochRef | undefined {
    return this.#history.latest();
  }

  /** An epoch's state, if it is among the last `keepEpochs`; shared, not copied: never mutate it. */
  snapshotAt(epoch: number): readonly RuntimeState[] | undefined {
    return this.#history.at(epoch);
  }

  /** The state of `latest()`, shared rather than copied (a copy of a large fleet takes seconds): never mutate it. */
  latestStates(): readonly RuntimeState[] | undefined {
    return this.#history.latestStates();
  }

  /**
   * Adds a follower's connection. A second connection for the same replica
   * replaces the first. The follower gets the latest epoch as a snapshot at
   * once and must send a full part before deltas are accepted.
   */
  attach(conn: SyncConnection, replica: string): void {
    if (this.#stopped) return conn.close(1001, 'leader stopped');
    let slot = this.#slots.get(replica);
    if (!slot) {
      if (!makeRoom(this.#slots, this.#o.followersMax)) return conn.close(1013, 'too many followers');
      slot = newSlot(replica, this.#o.clock.monotonicNow());
      this.#slots.set(replica, slot);
    }
    const previous = slot.conn;
    Object.assign(slot, {
      conn,
      partVersion: undefined,
      detachedAtMs: undefined,
      needsSnapshot: 'attached',
      sentEpoch: undefined,
      behindInARow: 0,
    });
    const attached = slot;
    conn.onMessage((msg) => {
      if (attached.conn === conn && !this.#stopped) this.#handle(attached, conn, msg);
    });
    conn.onClose(() => {
      if (attached.conn === conn) this.#detach(attached);
    });
    previous?.close(1000, 'replaced by a new connection');
    this.#catchUp(slot);
    this.notifyChange();
  }

  /** Asks for a cycle soon: after `debounceMs`, so a burst of changes makes one cycle. */
  notifyChange(): void {
    if (this.#stopped || this.#debounce) return;
    this.#debounce = this.#o.clock.setTimeout(() => {
      this.#debounce = undefined;
      this.#startCycle();
    }, this.#o.debounceMs);
  }

  /** Stops all cycles and timers and closes every follower connection. Idempotent. */
  stop(): void {
    if (this.#stopped) return;
    this.#stopped = true;
    this.#tick?.cancel();
    this.#debounce?.cancel();
    for (const cycle of this.#cycles) cycle.timer.cancel();
    this.#cycles = [];
    for (const slot of this.#slots.values()) slot.conn?.close(1001, 'leader stopped');
    this.#slots.clear();
  }

  #seed(parts: ReadonlyMap<string, readonly RuntimeState[]> | undefined): void {
    const now = this.#o.clock.monotonicNow();
    for (const [replica, part] of parts ?? []) {
      if (replica === this.#o.replicaId || !makeRoom(this.#slots, this.#o.followersMax)) continue;
      this.#slots.set(replica, { ...newSlot(replica, now), part, detachedAtMs: now });
    }
  }

  #armTick(): void {
    this.#tick = this.#o.clock.setTimeout(() => {
      this.#startCycle();
      if (!this.#stopped) this.#armTick();
    }, this.#o.cycleIntervalMs);
  }

  #detach(slot: FollowerSlot): void {
    slot.conn = undefined;
    slot.detachedAtMs = this.#o.clock.monotonicNow();
    for (const cycle of this.#cycles) cycle.waiting.delete(slot.replica);
    this.#commitReady();
  }

  #startCycle(): void {
    if (this.#stopped) return;
    if (this.#cycles.length >= this.#o.maxInFlight) {
      this.#promptPending = true;
      return;
    }
    this.#token = Math.max(this.#token, this.#history.latest()?.epoch ?? 0) + 1;
    const announce: SyncMessage = { type: 'announce', term: this.#o.term, epoch: this.#token };
    const waiting = new Set<string>();
    for (const slot of this.#slots.values()) {
      // An announce tells a follower it holds every commit sent before it: one that missed some gets the latest
      // epoch first (a connection that refuses it refuses the announce as well).
      this.#catchUp(slot);
      // One behind a run of parts answers once it has read the run: waiting for it would hold every commit back
      // for as long as the slowest such follower reads. Its collect still comes, as an unsolicited one.
      if (slot.conn?.send(announce) && !slot.conn.backlogged) waiting.add(slot.replica);
    }
    const cycle: Cycle = {
      token: this.#token,
      startedMs: this.#o.clock.monotonicNow(),
      waiting,
      timer: this.#o.clock.setTimeout(() => this.#conclude(this.#cycles.indexOf(cycle)), this.#o.cycleTimeoutMs),
    };
    this.#cycles.push(cycle);
    this.#commitReady();
  }

  #handle(slot: FollowerSlot, conn: SyncConnection, msg: SyncMessage): void {
    const { term } = this.#o;
    switch (msg.type) {
      case 'collect': {
        if (msg.term !== term) return;
        if (msg.replica !== slot.replica) {
          conn.send({ type: 'error', term, epoch: msg.epoch, reason: `collect names replica ${msg.replica}` });
          return;
        }
        const changed = this.#takePart(slot, conn, msg);
        const answered = this.#cycles.some((c) => c.token <= msg.epoch && c.waiting.has(slot.replica));
        for (const cycle of this.#cycles) if (cycle.token <= msg.epoch) cycle.waiting.delete(slot.replica);
        // An unsolicited collect is how a follower reports a change between cycles.
        if (changed && !answered) this.notifyChange();
        this.#commitReady();
        return;
      }
      case 'resync':
        if (msg.what === 'snapshot') {
          slot.needsSnapshot ??= 'asked';
          this.#catchUp(slot);
        }
        return;
      case 'error':
        this.#o.onFollowerError?.(slot.replica, msg.term, msg.reason, msg.latestEpoch);
        return;
      default:
        conn.send({ type: 'error', term, epoch: msg.epoch, reason: `unexpected ${msg.type} from a follower` });
    }
  }

  /** Stores the part a collect carries; returns whether it changed. */
  #takePart(slot: FollowerSlot, conn: SyncConnection, msg: Extract<SyncMessage, { type: 'collect' }>): boolean {
    slot.lastCollectMs = this.#o.clock.monotonicNow();
    if (msg.part.kind === 'full') {
      slot.part = msg.part.runtimes;
      slot.partVersion = msg.version;
      return true;
    }
    if (slot.partVersion !== msg.part.base || slot.part === undefined) {
      // Without the base the delta means nothing; keep the old part until a full one comes.
      conn.send({ type: 'resync', term: this.#o.term, what: 'part' });
      return false;
    }
    slot.partVersion = msg.version;
    if (msg.part.ops.length === 0) return false;
    slot.part = this.#o.apply(slot.part, msg.part.ops);
    return true;
  }

  /** Concludes the newest cycle every follower has answered, with all before it. */
  #commitReady(): void {
    for (let i = this.#cycles.length - 1; i >= 0; i--) {
      if (this.#cycles[i]!.waiting.size === 0) return this.#conclude(i);
    }
  }

  #conclude(index: number): void {
    if (index < 0 || this.#stopped) return;
    const done = this.#cycles.splice(0, index + 1);
    for (const cycle of done) cycle.timer.cancel();
    this.#commit(done[0]!.startedMs);
    if (this.#promptPending) {
      this.#promptPending = false;
      this.#startCycle();
    }
  }

  #commit(startedMs: number): void {
    const { clock, term, staleAfterMs } = this.#o;
    const now = clock.monotonicNow();
    this.#forgetLongDetached(now);
    const parts = [this.#o.localPart()];
    for (const slot of this.#slots.values()) if (slot.part) parts.push(effectivePart(slot, now, staleAfterMs));
    const next = this.#o.merge(parts);
    const base = this.#history.latest();
    const prev = this.#history.latestStates();
    if (!base || !prev) return this.#commitFirst(next, startedMs);
    const ops = this.#o.diff(prev, next);
    if (ops.length > 0) {
      const epoch = base.epoch + 1;
      this.#history.record({ epoch, term }, next);
      this.#snapshotMsg = undefined;
      this.#o.sink?.delta(epoch, term, base.epoch, ops);
      const delta: Commit = { type: 'commit', term, epoch, body: { kind: 'delta', baseEpoch: base.epoch, ops } };
      this.#lastDelta = { msg: delta, baseEpoch: base.epoch, ops };
      for (const slot of this.#slots.values()) {
        if (!slot.conn || slot.needsSnapshot || slot.sentEpoch !== base.epoch) continue;
        if (slot.conn.send(delta)) this.#tookDelta(slot, epoch);
        // Refused, and the snapshot taken: the delta was above the connection's limits, not behind a full buffer.
        else this.#sendSnapshot(slot, 'oversized');
      }
      this.#o.onCommit?.({ epoch, term, bytes: messageBytes(delta), durationMs: clock.monotonicNow() - startedMs });
    } else {
      this.#o.sink?.current?.(base.epoch, term);
    }
    for (const slot of this.#slots.values()) this.#catchUp(slot);
  }

  /**
   * Drops followers detached for `forgetAfterMs`, and their parts. Their
   * runtimes that live have redialled other replicas long since (and are
   * in those parts); the others would stay unavailable for good, and a
   * process they held could be placed nowhere else.
   */
  #forgetLongDetached(now: number): void {
    for (const [replica, slot] of this.#slots) {
      if (slot.conn || slot.detachedAtMs === undefined || now - slot.detachedAtMs < this.#o.forgetAfterMs) continue;
      this.#slots.delete(replica);
      this.#o.onFollowerForgotten?.(replica, slot.part?.length ?? 0);
    }
  }

  #commitFirst(states: readonly RuntimeState[], startedMs: number): void {
    const epoch = this.#o.startEpoch + 1;
    const { term } = this.#o;
    this.#history.record({ epoch, term }, states);
    this.#o.sink?.snapshot(epoch, term, states);
    for (const slot of this.#slots.values()) this.#catchUp(slot);
    const bytes = messageBytes(this.#latestSnapshot({ epoch, term }));
    this.#o.onCommit?.({ epoch, term, bytes, durationMs: this.#o.clock.monotonicNow() - startedMs });
  }

  /**
   * Brings a follower that does not hold the latest epoch up to it, if its connection takes a message: the snapshot
   * it waits for, else one delta from the epoch it took last, else (none worth sending, or refused for its size)
   * a snapshot. A connection with a full buffer refuses both; the next cycle or commit tries again.
   */
  #catchUp(slot: FollowerSlot): void {
    const latest = this.#history.latest();
    if (!slot.conn || !latest) return;
    if (slot.needsSnapshot) return this.#sendSnapshot(slot, slot.needsSnapshot);
    if (slot.sentEpoch === latest.epoch) return;
    const from = slot.sentEpoch;
    const delta = this.#deltaSince(from, latest);
    if (delta && slot.conn.send(delta)) {
      this.#tookDelta(slot, latest.epoch);
      return this.#o.onCatchUpSent?.({ replica: slot.replica, baseEpoch: from!, epoch: latest.epoch });
    }
    this.#sendSnapshot(slot, delta ? 'oversized' : 'behind');
  }

  #tookDelta(slot: FollowerSlot, epoch: number): void {
    slot.sentEpoch = epoch;
    slot.behindInARow = 0;
  }

  /**
   * The delta from `from` to the latest epoch, built once for all followers that took `from` last. Undefined when
   * the history no longer holds `from`, or when the delta has at least as many ops as the latest state has entries:
   * each op carries about what an entry does, so the snapshot is no larger, and the follower builds it no slower.
   */
  #deltaSince(from: number | undefined, latest: EpochRef): Commit | undefined {
    const prev = from === undefined ? undefined : this.#history.at(from);
    if (from === undefined || prev === undefined) return undefined;
    if (this.#catchUps?.epoch !== latest.epoch) this.#catchUps = { epoch: latest.epoch, byBase: new Map() };
    const { byBase } = this.#catchUps;
    if (!byBase.has(from)) {
      const next = this.#history.latestStates()!;
      // The committed delta itself when it starts there: one message object, encoded once for every follower.
      const last = this.#lastDelta;
      const committed = last?.msg.epoch === latest.epoch && last.baseEpoch === from ? last : undefined;
      const ops = committed?.ops ?? this.#o.diff(prev, next);
      const { epoch, term } = latest;
      const delta = committed?.msg ?? { type: 'commit', term, epoch, body: { kind: 'delta', baseEpoch: from, ops } };
      byBase.set(from, ops.length < entries(next) ? delta : undefined);
    }
    return byBase.get(from);
  }

  /** Sends the latest epoch as a snapshot, if the slot's connection accepts it, and reports why. */
  #sendSnapshot(slot: FollowerSlot, reason: SnapshotReason): void {
    const latest = this.#history.latest();
    if (!slot.conn || !latest) return;
    if (!slot.conn.send(this.#latestSnapshot(latest))) return;
    slot.needsSnapshot = undefined;
    slot.sentEpoch = latest.epoch;
    if (reason === 'behind') slot.behindInARow++;
    const behindInARow = reason === 'behind' ? slot.behindInARow : 0;
    this.#o.onSnapshotSent?.({ replica: slot.replica, reason, epoch: latest.epoch, behindInARow });
  }

  /** The snapshot commit of the latest epoch, built once and shared by every follower that needs it. */
  #latestSnapshot(latest: EpochRef): SyncMessage {
    if (this.#snapshotMsg?.epoch !== latest.epoch) {
      const runtimes = this.#history.latestStates() as RuntimeState[];
      const snapshot = { epoch: latest.epoch, term: latest.term, runtimes };
      this.#snapshotMsg = {
        type: 'commit',
        term: latest.term,
        epoch: latest.epoch,
        body: { kind: 'snapshot', snapshot },
      };
    }
    return this.#snapshotMsg;
  }
}

type Commit = Extract<SyncMessage, { type: 'commit' }>;

/** Runtimes, processes and threads of `states`: what a snapshot of them lists. */
function entries(states: readonly RuntimeState[]): number {
  let count = 0;
  for (const s of states) count += 1 + s.processes.length + s.threads.length;
  return count;
}
