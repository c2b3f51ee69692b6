import type { Clock, Timer } from '@switchyard/clock';
import type { Part, RuntimeState, SyncMessage } from '@switchyard/protocol';
import { EpochHistory } from './history.ts';
import { EPOCH_DEFAULTS, checkInt } from './options.ts';
import type { ApplyFn, DiffFn, EpochRef, EpochSink, RejectInfo, SyncConnection } from './types.ts';

export interface EpochFollowerOptions {
  readonly replicaId: string;
  readonly clock: Clock;
  /** This replica's part. Must return a value that is not mutated afterwards (it is the base of the next delta). */
  readonly localPart: () => readonly RuntimeState[];
  readonly diff: DiffFn;
  /** Applies a commit's delta to the previous epoch's state (kept for `snapshotAt`). */
  readonly apply: ApplyFn;
  readonly sink: EpochSink;
  readonly keepEpochs?: number;
  /** After `notifyChange`, wait this long before reporting the part. */
  readonly debounceMs?: number;
  readonly connectionsMax?: number;
  /** A message was fenced off (lower term) or malformed; an `error` also went back to its sender. */
  readonly onReject?: (info: RejectInfo) => void;
}

type Commit = Extract<SyncMessage, { type: 'commit' }>;

/**
 * Follower side of epoch sync. Answers announces with its part (a delta
 * against the version it last sent on the current connection, full after
 * an attach, a new term or a `resync part`), and feeds commits to the sink.
 *
 * Guarantees:
 * - fencing: once a term is seen, nothing of a lower term reaches the sink,
 *   whichever connection it arrives on; it is reported through `onReject`
 *   and answered with `error`, which carries the latest epoch held (its
 *   `latestEpoch`) for the leader's next term to number above;
 * - one history per term: a leader whose snapshot of the sink's own term
 *   is not in its history (an epoch below its latest, or that epoch with
 *   other content: the term was handed out twice) has the whole term
 *   fenced off, answered with an `error` naming the term above it, so the
 *   sink never goes back to a lower epoch of a term nor mixes two;
 * - epoch numbers do not go back across terms either, nor does one number
 *   change content, with a leader that reads `latestEpoch`
 *   (`SyncConnection.peerReadsLatestEpoch`): its snapshot of a higher term
 *   numbered below the latest epoch held, or at it with other content, has
 *   its term refused whole, like a second history, so it leads again
 *   above; a leader of an earlier version is followed as before;
 * - the sink sees epochs in order: a delta only when its base is the
 *   sink's latest epoch of the same term, else a `resync snapshot` is sent
 *   (once per gap) and deltas are dropped until a snapshot arrives.
 *
 * A delta the connection refuses (one above the leader's frame limit or
 * of more than `SYNC_OPS_MAX` ops) goes as the full part instead, which
 * the connection sends in parts.
 *
 * Not guaranteed: that the part reaches the leader (a refused send is
 * retried at the next announce). Connections stay open until `stop()` or
 * until more than `connectionsMax` are attached (the oldest is closed).
 */
export class EpochFollower {
  readonly #o: EpochFollowerOptions & { keepEpochs: number; debounceMs: number; connectionsMax: number };
  readonly #history: EpochHistory;
  readonly #conns = new Set<SyncConnection>();
  #current: SyncConnection | undefined;
  #term = -1;
  #announce: { term: number; epoch: number } | undefined;
  #sent: { states: readonly RuntimeState[]; version: number } | undefined;
  #version = 0;
  #awaitingSnapshot = false;
  #debounce: Timer | undefined;
  #stopped = false;

  constructor(options: EpochFollowerOptions) {
    const { keepEpochs, debounceMs, connectionsMax } = EPOCH_DEFAULTS;
    this.#o = { keepEpochs, debounceMs, connectionsMax, ...options };
    checkInt('debounceMs', this.#o.debounceMs, 0);
    checkInt('connectionsMax', this.#o.connectionsMax, 1);
    this.#history = new EpochHistory(this.#o.keepEpochs);
  }

  /** Lowest term still accepted: the highest seen, or one above a term found to carry two histories; -1 at first. */
  get term(): number {
    return this.#term;
  }

  latest(): EpochRef | undefined {
    return this.#history.latest();
  }

  /** An epoch's state, if it is among the last `keepEpochs`; shared, not copied: never mutate it. */
  snapshotAt(epoch: number): readonly RuntimeState[] | undefined {
    return this.#history.at(epoch);
  }

  /**
   * Takes an epoch this replica's own leader committed (the sink holds it
   * already: it was that leader's sink too) as the latest, when that
   * leadership ends, so the next leader's commits are judged against it.
   * Ignored unless it is newer than the latest epoch held.
   */
  adopt(ref: EpochRef, states: readonly RuntimeState[]): void {
    const latest = this.#history.latest();
    if (latest && (ref.term < latest.term || (ref.term === latest.term && ref.epoch <= latest.epoch))) return;
    this.#history.record(ref, states);
    this.#term = Math.max(this.#term, ref.term);
  }

  /** Makes `conn` the current leader's connection; earlier ones stay open but only commits pass there (fenced). */
  attach(conn: SyncConnection): void {
    if (this.#stopped) return conn.close(1001, 'follower stopped');
    this.#conns.add(conn);
    if (this.#conns.size > this.#o.connectionsMax) {
      const oldest = this.#conns.values().next().value!;
      this.#conns.delete(oldest);
      oldest.close(1000, 'superseded');
    }
    this.#current = conn;
    this.#announce = undefined;
    this.#sent = undefined;
    this.#awaitingSnapshot = false;
    conn.onMessage((msg) => {
      if (this.#conns.has(conn)) this.#handle(conn, msg);
    });
    conn.onClose(() => {
      this.#conns.delete(conn);
      if (this.#current === conn) this.#current = undefined;
    });
  }

  /** Reports the part to the leader soon (after `debounceMs`) instead of waiting for the next announce. */
  notifyChange(): void {
    if (this.#stopped || this.#debounce) return;
    this.#debounce = this.#o.clock.setTimeout(() => {
      this.#debounce = undefined;
      this.#sendCollect();
    }, this.#o.debounceMs);
  }

  /** Closes every connection and clears timers. Idempotent. */
  stop(): void {
    if (this.#stopped) return;
    this.#stopped = true;
    this.#debounce?.cancel();
    for (const conn of this.#conns) conn.close(1001, 'follower stopped');
    this.#conns.clear();
    this.#current = undefined;
  }

  #handle(conn: SyncConnection, msg: SyncMessage): void {
    if (msg.term < this.#term) {
      const epoch = 'epoch' in msg ? msg.epoch : 0;
      return this.#reject(conn, msg.type, msg.term, epoch, `term ${msg.term} is below ${this.#term}`);
    }
    if (msg.term > this.#term) {
      this.#term = msg.term;
      this.#sent = undefined; // a new leader has none of our part
    }
    switch (msg.type) {
      case 'announce':
        if (conn !== this.#current) return;
        this.#announce = { term: msg.term, epoch: msg.epoch };
        this.#confirmCurrent(msg.term);
        return this.#sendCollect();
      case 'commit':
        return this.#commit(conn, msg);
      case 'resync':
        if (msg.what === 'part' && conn === this.#current) {
          this.#sent = undefined;
          this.#sendCollect();
        }
        return;
      default:
        // `error` from a leader needs no answer; `collect` is not for followers.
        return;
    }
  }

  #commit(conn: SyncConnection, msg: Commit): void {
    const latest = this.#history.latest();
    const sameTerm = latest?.term === msg.term;
    if (msg.body.kind === 'snapshot') {
      const { snapshot } = msg.body;
      if (snapshot.epoch !== msg.epoch || snapshot.term !== msg.term) {
        return this.#reject(conn, 'commit', msg.term, msg.epoch, 'snapshot epoch or term differs from its commit');
      }
      if (sameTerm && conn === this.#current && this.#notOurs(msg.epoch, latest, snapshot.runtimes)) {
        const held = `is not the history this replica holds (epoch ${latest.epoch})`;
        return this.#fenceTerm(conn, msg, held);
      }
      // A higher term from a leader that had not seen our epoch: numbered below it, or at it with other content
      // (one epoch number, one content, whatever the term).
      const laterTerm = latest !== undefined && msg.term > latest.term && conn.peerReadsLatestEpoch === true;
      if (laterTerm && this.#notOurs(msg.epoch, latest, snapshot.runtimes)) {
        return this.#fenceTerm(conn, msg, `would replace epoch ${latest.epoch} of term ${latest.term}, held here`);
      }
      if (sameTerm && msg.epoch < latest.epoch) return; // a delayed commit of this leader on an earlier connection
      this.#history.record(msg, snapshot.runtimes);
      this.#awaitingSnapshot = false;
      this.#o.sink.snapshot(msg.epoch, msg.term, snapshot.runtimes);
      return;
    }
    const { baseEpoch, ops } = msg.body;
    if (sameTerm && msg.epoch <= latest.epoch) return; // a repeat
    const base = sameTerm && baseEpoch === latest.epoch ? this.#history.latestStates() : undefined;
    if (!base) {
      if (!this.#awaitingSnapshot)
        this.#awaitingSnapshot = conn.send({ type: 'resync', term: msg.term, what: 'snapshot' });
      return;
    }
    this.#history.record(msg, this.#o.apply(base, ops));
    this.#o.sink.delta(msg.epoch, msg.term, baseEpoch, ops);
  }

  /**
   * Whether a snapshot is numbered below the latest epoch held, or at it with other content. Of the latest
   * epoch's term, from the leader we follow now, that is another history: that leader's first commit on a
   * connection is its latest epoch, never below one it sent us before, and the same epoch again has the same
   * content. Of a higher term, its leader had not seen the epoch held.
   */
  #notOurs(epoch: number, latest: EpochRef, runtimes: readonly RuntimeState[]): boolean {
    if (epoch !== latest.epoch) return epoch < latest.epoch;
    const held = this.#history.latestStates();
    return held !== undefined && this.#o.diff(held, runtimes).length > 0;
  }

  /**
   * Refuses the whole term of `msg`, whose snapshot would take the sink back: two histories under one term
   * (the lease was created again at it by a replica that had never read it), or a higher term numbered below
   * the epoch held, or at it with other content (its leader had not seen that epoch). The `error` names the
   * term above it and the latest epoch held, which makes the leader lead again above both.
   */
  #fenceTerm(conn: SyncConnection, msg: Commit, why: string): void {
    this.#term = msg.term + 1;
    this.#sent = undefined;
    this.#reject(conn, 'commit', msg.term, msg.epoch, `epoch ${msg.epoch} of term ${msg.term} ${why}`);
  }

  /** An announce of the leader's term follows every commit it sent before: the sink is as new as the leader. */
  #confirmCurrent(term: number): void {
    const latest = this.#history.latest();
    if (latest?.term === term && !this.#awaitingSnapshot) this.#o.sink.current?.(latest.epoch, latest.term);
  }

  #sendCollect(): void {
    const conn = this.#current;
    const announce = this.#announce;
    if (!conn || !announce || this.#stopped) return;
    const states = this.#o.localPart();
    let part: Part;
    let version: number;
    if (!this.#sent) {
      version = ++this.#version;
      part = { kind: 'full', runtimes: [...states] };
    } else {
      const ops = this.#o.diff(this.#sent.states, states);
      version = ops.length > 0 ? ++this.#version : this.#sent.version;
      part = { kind: 'delta', base: this.#sent.version, ops };
    }
    const { term, epoch } = announce;
    const collect = (body: Part): SyncMessage => ({
      type: 'collect',
      term,
      epoch,
      replica: this.#o.replicaId,
      version,
      part: body,
    });
    // A delta refused may be one above the leader's frame limit or SYNC_OPS_MAX ops, which would close the
    // connection: the full part goes instead, in parts. One refused for backpressure is refused again at once, and the next collect retries.
    const full = (): boolean => part.kind === 'delta' && conn.send(collect({ kind: 'full', runtimes: [...states] }));
    if (conn.send(collect(part)) || full()) this.#sent = { states, version };
  }

  #reject(conn: SyncConnection, type: SyncMessage['type'], term: number, epoch: number, reason: string): void {
    this.#o.onReject?.({ type, term, epoch, reason });
    // Our latest epoch goes with every refusal: a leader that learns a higher term from it numbers that
    // term's epochs above it, so this replica's epoch number does not go back when it follows that term.
    const latestEpoch = this.#history.latest()?.epoch;
    conn.send({
      type: 'error',
      term: Math.max(this.#term, 0),
      epoch,
      reason,
      ...(latestEpoch === undefined ? {} : { latestEpoch }),
    });
  }
}
