import { systemClock } from '@switchyard/clock';
import { ManualClock } from '@switchyard/clock/testing';
import type { ClusterOp, RuntimeState } from '@switchyard/protocol';
import { EpochFollower, EpochLeader } from '@switchyard/epoch';
import type { EpochFollowerOptions, EpochLeaderOptions, EpochSink, RejectInfo } from '@switchyard/epoch';
import {
  MemoryLink,
  canonicalStates,
  referenceApply,
  referenceDiff,
  referenceMerge,
  runtimeState,
} from '@switchyard/epoch/testing';

export { runtimeState };

export interface Applied {
  readonly epoch: number;
  readonly term: number;
  readonly kind: 'snapshot' | 'delta';
  readonly state: string;
}

/** A sink that keeps the state it was fed, and a canonical record per epoch. */
export class RecordingSink implements EpochSink {
  states: RuntimeState[] = [];
  readonly applied: Applied[] = [];
  /** `term:epoch` of each confirmation that the latest epoch is still the newest. */
  readonly confirmed: string[] = [];

  current(epoch: number, term: number): void {
    this.confirmed.push(`${term}:${epoch}`);
  }

  snapshot(epoch: number, term: number, states: readonly RuntimeState[]): void {
    this.states = [...states];
    this.applied.push({ epoch, term, kind: 'snapshot', state: canonicalStates(this.states) });
  }

  delta(epoch: number, term: number, _baseEpoch: number, ops: readonly ClusterOp[]): void {
    this.states = referenceApply(this.states, ops);
    this.applied.push({ epoch, term, kind: 'delta', state: canonicalStates(this.states) });
  }

  get last(): Applied | undefined {
    return this.applied.at(-1);
  }
}

export interface FollowerNode {
  readonly replica: string;
  part: RuntimeState[];
  readonly sink: RecordingSink;
  readonly follower: EpochFollower;
  readonly rejects: RejectInfo[];
  link: MemoryLink;
}

export interface Cluster {
  readonly clock: ManualClock;
  readonly leader: EpochLeader;
  readonly leaderSink: RecordingSink;
  leaderPart: RuntimeState[];
  readonly nodes: Map<string, FollowerNode>;
  /** Connects (or reconnects) a follower to the leader over a fresh link. */
  connect(replica: string): MemoryLink;
  stop(): void;
}

/** A leader with followers on memory links; every part starts with one runtime `<replica>-r1`. */
export function startCluster(
  replicas: readonly string[],
  leaderOptions: Partial<EpochLeaderOptions> = {},
  followerOptions: Partial<EpochFollowerOptions> = {},
): Cluster {
  const clock = new ManualClock();
  const leaderSink = new RecordingSink();
  const nodes = new Map<string, FollowerNode>();
  const cluster: Cluster = {
    clock,
    leaderSink,
    leaderPart: [runtimeState('leader-r1', 'leader', ['p1/t1'])],
    nodes,
    leader: new EpochLeader({
      replicaId: 'leader',
      term: 1,
      clock,
      localPart: () => cluster.leaderPart,
      merge: referenceMerge,
      diff: referenceDiff,
      apply: referenceApply,
      sink: leaderSink,
      ...leaderOptions,
    }),
    connect(replica) {
      const node = nodes.get(replica)!;
      node.link = new MemoryLink();
      node.follower.attach(node.link.b);
      cluster.leader.attach(node.link.a, replica);
      return node.link;
    },
    stop() {
      cluster.leader.stop();
      for (const node of nodes.values()) node.follower.stop();
    },
  };
  for (const replica of replicas) {
    const sink = new RecordingSink();
    const rejects: RejectInfo[] = [];
    const node: FollowerNode = {
      replica,
      part: [runtimeState(`${replica}-r1`, replica, ['p1/t1'])],
      sink,
      rejects,
      link: new MemoryLink(),
      follower: new EpochFollower({
        replicaId: replica,
        clock,
        localPart: () => node.part,
        diff: referenceDiff,
        apply: referenceApply,
        sink,
        onReject: (info) => rejects.push(info),
        ...followerOptions,
      }),
    };
    nodes.set(replica, node);
    cluster.connect(replica);
  }
  return cluster;
}

/**
 * A follower `replicaId` offering `localPart`, on the reference diff and
 * apply and the system clock (`options` may say otherwise), and the sink
 * that records what it applies. Not attached to any leader.
 */
export function recordingFollower(
  replicaId: string,
  localPart: () => RuntimeState[],
  options: Partial<EpochFollowerOptions> = {},
): { follower: EpochFollower; sink: RecordingSink } {
  const sink = new RecordingSink();
  const follower = new EpochFollower({
    replicaId,
    clock: systemClock,
    localPart,
    diff: referenceDiff,
    apply: referenceApply,
    sink,
    ...options,
  });
  return { follower, sink };
}

/** The runtime ids of a state with their availability, sorted: `['a-r1:up', 'b-r1:down']`. */
export function availability(states: readonly RuntimeState[]): string[] {
  return states.map((s) => `${s.runtime.id}:${s.runtime.available ? 'up' : 'down'}`).sort();
}
