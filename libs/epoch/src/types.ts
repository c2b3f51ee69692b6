import type { ClusterOp, RuntimeState, SyncMessage } from '@switchyard/protocol';

/** An epoch number together with the leadership term that committed it. */
export interface EpochRef {
  readonly epoch: number;
  readonly term: number;
}

/**
 * Receives committed epochs in order. `delta` ops apply to the state of
 * `baseEpoch`, which the sink saw last; `snapshot` replaces everything.
 */
export interface EpochSink {
  snapshot(epoch: number, term: number, states: readonly RuntimeState[]): void;
  delta(epoch: number, term: number, baseEpoch: number, ops: readonly ClusterOp[]): void;
  /**
   * The sink's latest epoch is still the newest: a cycle concluded with no
   * change (leader), or the leader announced a cycle and no commit is missing
   * (follower). No state changes; it tells how fresh the sink is.
   */
  current?(epoch: number, term: number): void;
}

/** Merges the parts of every replica into one cluster state (`mergeParts` of the scheduling lib). */
export type MergeFn = (parts: ReadonlyArray<readonly RuntimeState[]>) => RuntimeState[];
/** Ops that turn `prev` into `next` (`diffStates` of the scheduling lib). */
export type DiffFn = (prev: readonly RuntimeState[], next: readonly RuntimeState[]) => ClusterOp[];
/** Applies ops to a state and returns the new state (a `ClusterIndex` round trip). Must not mutate `states`. */
export type ApplyFn = (states: readonly RuntimeState[], ops: readonly ClusterOp[]) => RuntimeState[];

/**
 * One end of an epoch sync channel. Messages arrive in the order they were
 * sent, or the channel closes; nothing is retried underneath.
 */
export interface SyncConnection {
  /**
   * Queues `msg`. Returns false, without queueing, when the connection is
   * closed or its send buffer is over its bound (backpressure), or `msg` is
   * a delta commit or collect of more than `SYNC_OPS_MAX` ops (over
   * WebSocket) or above the peer's frame limit (over WebSocket, to a peer
   * that reads runs of parts); the caller decides what to do
   * instead (a leader sends a snapshot once the connection accepts one, a
   * follower its full part). While a run of parts goes out (`backlogged`,
   * over WebSocket) a message waits behind it, within the bound; a snapshot
   * commit or full collect, or one past the bound, is refused, and so is every later one
   * until the run is out: none overtakes a refused one.
   */
  send(msg: SyncMessage): boolean;
  /** Registers the handler of validated inbound messages (one handler; a later call replaces it). */
  onMessage(cb: (msg: SyncMessage) => void): void;
  /** Registers the close handler; it runs once, after which `send` returns false. */
  onClose(cb: (code: number, reason: string) => void): void;
  /** Closes the connection; idempotent. */
  close(code: number, reason: string): void;
  /** Bytes queued but not yet written to the peer. */
  readonly bufferedBytes: number;
  /**
   * A run of parts is still going out: what `send` takes now reaches the peer only after it, however slowly the
   * peer reads. Undefined counts as false (a connection that sends every message at once).
   */
  readonly backlogged?: boolean;
  /**
   * The peer reads an `error`'s `latestEpoch`: a leader of this version, whose next term then numbers its
   * epochs above it. Undefined counts as false (a leader of an earlier version, or not known).
   */
  readonly peerReadsLatestEpoch?: boolean;
}

/**
 * Why the leader sends a follower a snapshot: it `attached` (a new connection), it `asked` (it saw a gap), it
 * fell `behind` (it missed epochs while its connection was busy, and no one delta catches it up: the leader no
 * longer keeps the epoch it took last, or what changed since is as large as the state), or the delta it was due
 * was `oversized` (above its connection's frame limit or `SYNC_OPS_MAX` ops).
 */
export type SnapshotReason = 'attached' | 'asked' | 'behind' | 'oversized';

/** A snapshot the leader's connection to a follower took. */
export interface SnapshotInfo {
  readonly replica: string;
  readonly reason: SnapshotReason;
  readonly epoch: number;
  /**
   * Snapshots sent to it for `behind` since it last took a delta on this connection, this one included (0 for
   * another reason). Each costs the whole cluster's state: a count that keeps growing is a follower that reads
   * slower than the cluster changes.
   */
  readonly behindInARow: number;
}

/** A catch-up delta the leader's connection to a follower took: from `baseEpoch`, the epoch it took last, to `epoch`. */
export interface CatchUpInfo {
  readonly replica: string;
  readonly baseEpoch: number;
  readonly epoch: number;
}

/** What a follower reports through `onReject` when it fences off a message. */
export interface RejectInfo {
  readonly type: SyncMessage['type'];
  readonly term: number;
  readonly epoch: number;
  readonly reason: string;
}
