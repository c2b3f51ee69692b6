import { Throttle, type Clock } from '@switchyard/clock';
import type { SnapshotInfo, SnapshotReason } from '@switchyard/epoch';
import type { ReplicaLogger } from './options.ts';

/**
 * Snapshots in a row, each sent because the follower was `behind` (its connection stayed busy for more epochs
 * than the leader keeps, so no one delta could catch it up), that make it a follower that cannot keep up. One
 * or two follow a burst of changes or a slow moment; three mean it gets the whole cluster's state each time it
 * reads.
 */
export const BEHIND_IN_A_ROW_WARN = 3;

/** Such a follower stays so for as long as the cluster changes faster than it reads: one line a minute says it. */
export const FOLLOWER_BEHIND_LOG_INTERVAL_MS = 60_000;

/**
 * Followers whose lines the leader throttles apart, at most; past it the one logged longest ago is forgotten. A
 * cluster has a few replicas: this bounds the memory against a flood of follower names, not the usual case.
 */
export const FOLLOWERS_LOGGED_MAX = 64;

/**
 * The leader's view of the snapshots it sends followers: each is counted by reason (`count`), and a follower
 * sent `BEHIND_IN_A_ROW_WARN` or more in a row for being `behind` is warned of, naming it, at most once per
 * `FOLLOWER_BEHIND_LOG_INTERVAL_MS` for each follower (a second one behind is named while the first still is),
 * with `unlogged` counting that follower's snapshots held back.
 */
export class FollowerSnapshots {
  readonly #logger: ReplicaLogger;
  readonly #throttle: Throttle;
  readonly #count: (reason: SnapshotReason) => void;

  constructor(logger: ReplicaLogger, clock: Clock, count: (reason: SnapshotReason) => void) {
    this.#logger = logger;
    this.#throttle = new Throttle(clock, FOLLOWER_BEHIND_LOG_INTERVAL_MS, FOLLOWERS_LOGGED_MAX);
    this.#count = count;
  }

  sent(info: SnapshotInfo): void {
    this.#count(info.reason);
    if (info.behindInARow < BEHIND_IN_A_ROW_WARN) return;
    const unlogged = this.#throttle.pass(info.replica);
    if (unlogged === undefined) return;
    this.#logger.warn(
      { replica: info.replica, snapshots: info.behindInARow, epoch: info.epoch, unlogged },
      'a follower misses more epochs between its reads than the leader keeps, and gets the whole cluster state ' +
        'each time: it reads slower than the cluster changes (its CPU, the network between the replicas, or a state too large ' +
        'to read between two commits); give its pod more CPU or check that network',
    );
  }
}
