/**
 * Epoch sync between scheduler replicas (design brief §6): the leader
 * merges every replica's part into numbered epochs and pushes them as
 * deltas (snapshots on demand); followers fence off lower terms.
 * State machines run on an injected Clock; merge/diff/apply are injected
 * (the scheduling lib provides them). Test helpers live in `./testing`.
 */
export { EpochLeader } from './leader.ts';
export type { EpochLeaderOptions, CommitInfo } from './leader.ts';
export { EpochFollower } from './follower.ts';
export type { EpochFollowerOptions } from './follower.ts';
export { EPOCH_DEFAULTS } from './options.ts';
export type {
  ApplyFn,
  CatchUpInfo,
  DiffFn,
  EpochRef,
  EpochSink,
  MergeFn,
  RejectInfo,
  SnapshotInfo,
  SnapshotReason,
  SyncConnection,
} from './types.ts';
export {
  wsSyncConnection,
  WS_SYNC_DEFAULTS,
  CLOSE_POLICY,
  CLOSE_REASON_RUN_TOO_BIG,
  CLOSE_TOO_BIG,
} from './ws-connection.ts';
export type { WsSyncConnectionOptions } from './ws-connection.ts';
export { createSyncServer, connectSync, CLOSE_REASON_WITHDRAWN, SYNC_PAYLOAD_BYTES_MAX } from './ws-server.ts';
export type { SyncServer, SyncServerOptions, ConnectSyncOptions } from './ws-server.ts';
