import { afterEach, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { SyncMessage } from '@switchyard/protocol';
import { canonicalStates } from '@switchyard/epoch/testing';
import { availability, runtimeState, startCluster } from './support/cluster.ts';
import type { Cluster } from './support/cluster.ts';

type Commit = Extract<SyncMessage, { type: 'commit' }>;
const commits = (c: Cluster, replica: string): Commit[] =>
  c.nodes
    .get(replica)!
    .link.log.filter((e) => e.from === 'a' && e.fate === 'delivered' && e.msg.type === 'commit')
    .map((e) => e.msg as Commit);

/** Adds a thread to a follower's first runtime and tells the follower. */
function addThread(c: Cluster, replica: string, thread: string): void {
  const node = c.nodes.get(replica)!;
  const [first, ...rest] = node.part;
  const threads = [...first!.threads.map((t) => `${t.process}/${t.thread}`), thread];
  node.part = [runtimeState(first!.runtime.id, replica, threads), ...rest];
  node.follower.notifyChange();
}

function assertConverged(c: Cluster): void {
  const want = canonicalStates(c.leaderSink.states);
  for (const node of c.nodes.values()) {
    assert.equal(node.sink.last?.epoch, c.leader.latest()?.epoch, `${node.replica} is at the leader's epoch`);
    assert.equal(node.sink.last?.state, want, `${node.replica} holds the leader's state`);
  }
}

describe('EpochLeader transcripts', () => {
  let cluster: Cluster | undefined;
  afterEach(() => cluster?.stop());

  it('announce → collect → commit: the first epoch reaches followers as a snapshot of every part', async () => {
    cluster = startCluster(['f1', 'f2']);
    await cluster.clock.advance(20);
    const link = cluster.nodes.get('f1')!.link;
    assert.deepEqual(link.types('a'), ['announce', 'commit']);
    assert.deepEqual(link.types('b'), ['collect']);
    const [commit] = commits(cluster, 'f1');
    assert.equal(commit!.body.kind, 'snapshot');
    assert.deepEqual(cluster.leader.latest(), { epoch: 1, term: 1 });
    assert.deepEqual(availability(cluster.leaderSink.states), ['f1-r1:up', 'f2-r1:up', 'leader-r1:up']);
    assertConverged(cluster);
  });

  it('a change on one follower reaches the other as a delta against the previous epoch', async () => {
    cluster = startCluster(['f1', 'f2']);
    await cluster.clock.advance(20);
    addThread(cluster, 'f1', 'p1/t2');
    await cluster.clock.advance(40); // follower debounce, then leader debounce
    const last = commits(cluster, 'f2').at(-1)!;
    assert.equal(last.epoch, 2);
    assert.deepEqual(last.body, {
      kind: 'delta',
      baseEpoch: 1,
      ops: [{ op: 'thread.add', runtimeId: 'f1-r1', process: 'p1', thread: 't2' }],
    });
    const f1Collects = cluster.nodes.get('f1')!.link.log.filter((e) => e.msg.type === 'collect');
    assert.equal((f1Collects.at(-1)!.msg as Extract<SyncMessage, { type: 'collect' }>).part.kind, 'delta');
    assertConverged(cluster);
  });

  it('a follower that missed a commit asks for a snapshot and converges', async () => {
    cluster = startCluster(['f1', 'f2']);
    await cluster.clock.advance(20);
    const f2 = cluster.nodes.get('f2')!;
    f2.link.drop = (msg, from) => from === 'a' && msg.type === 'commit';
    addThread(cluster, 'f1', 'p1/t2');
    await cluster.clock.advance(40);
    f2.link.drop = undefined;
    addThread(cluster, 'f1', 'p1/t3');
    await cluster.clock.advance(40);
    assert.ok(f2.link.types('b').includes('resync'), 'f2 asked for a snapshot');
    assert.deepEqual(
      f2.sink.applied.map((a) => `${a.epoch}:${a.kind}`),
      ['1:snapshot', '3:snapshot'],
    );
    assertConverged(cluster);
  });

  it('a cycle that changes nothing commits nothing', async () => {
    const sizes: number[] = [];
    cluster = startCluster(['f1'], { onCommit: (info) => sizes.push(info.bytes) });
    await cluster.clock.advance(20);
    await cluster.clock.advance(3000);
    const link = cluster.nodes.get('f1')!.link;
    assert.equal(link.types('a').filter((t) => t === 'announce').length, 4, 'cycles kept running');
    assert.equal(link.types('a').filter((t) => t === 'commit').length, 1);
    assert.equal(sizes.length, 1);
    assert.deepEqual(cluster.leader.latest(), { epoch: 1, term: 1 });
  });

  it('cycles that change nothing tell the leader and follower sinks their latest epoch is still current', async () => {
    cluster = startCluster(['f1']);
    await cluster.clock.advance(20);
    await cluster.clock.advance(3000);
    assert.deepEqual(cluster.leaderSink.confirmed, ['1:1', '1:1', '1:1']);
    assert.deepEqual(cluster.nodes.get('f1')!.sink.confirmed, ['1:1', '1:1', '1:1']);
  });

  it('a silent follower holds a cycle back for cycleTimeoutMs and no longer', async () => {
    cluster = startCluster(['f1', 'f2'], { cycleIntervalMs: 60_000 });
    await cluster.clock.advance(20);
    cluster.nodes.get('f2')!.link.drop = (_msg, from) => from === 'b';
    cluster.leaderPart = [runtimeState('leader-r1', 'leader', ['p1/t1', 'p1/t2'])];
    cluster.leader.notifyChange();
    await cluster.clock.advance(20 + 4999);
    assert.equal(cluster.leader.latest()?.epoch, 1, 'still waiting for f2');
    assert.equal(cluster.leader.inFlight, 1);
    await cluster.clock.advance(1);
    assert.equal(cluster.leader.latest()?.epoch, 2, 'committed without f2');
    assert.equal(cluster.nodes.get('f1')!.sink.last?.epoch, 2);
  });

  it('a follower silent for staleAfterMs has its runtimes committed unavailable, and back when it returns', async () => {
    cluster = startCluster(['f1', 'f2']);
    await cluster.clock.advance(20);
    const f2 = cluster.nodes.get('f2')!;
    f2.link.drop = (_msg, from) => from === 'b';
    await cluster.clock.advance(9_000);
    assert.deepEqual(availability(cluster.leaderSink.states), ['f1-r1:up', 'f2-r1:up', 'leader-r1:up']);
    await cluster.clock.advance(8_000);
    assert.deepEqual(availability(cluster.leaderSink.states), ['f1-r1:up', 'f2-r1:down', 'leader-r1:up']);
    assert.deepEqual(availability(cluster.nodes.get('f1')!.sink.states), ['f1-r1:up', 'f2-r1:down', 'leader-r1:up']);
    f2.link.drop = undefined;
    await cluster.clock.advance(7_000);
    assert.deepEqual(availability(cluster.leaderSink.states), ['f1-r1:up', 'f2-r1:up', 'leader-r1:up']);
    assertConverged(cluster);
  });

  it('forgets a follower detached for forgetAfterMs, with its runtimes, and takes it back when it returns', async () => {
    const forgotten: string[] = [];
    cluster = startCluster(['f1', 'f2'], {
      forgetAfterMs: 60_000,
      onFollowerForgotten: (replica, runtimes) => forgotten.push(`${replica}:${runtimes}`),
    });
    await cluster.clock.advance(20);
    cluster.nodes.get('f2')!.link.closeBoth(1006, 'replica gone');
    await cluster.clock.advance(59_000);
    assert.deepEqual(availability(cluster.leaderSink.states), ['f1-r1:up', 'f2-r1:down', 'leader-r1:up']);
    assert.deepEqual(forgotten, []);
    // Forgotten at the first cycle (one a second) past forgetAfterMs.
    await cluster.clock.advance(2_000);
    assert.deepEqual(availability(cluster.leaderSink.states), ['f1-r1:up', 'leader-r1:up']);
    assert.deepEqual(availability(cluster.nodes.get('f1')!.sink.states), ['f1-r1:up', 'leader-r1:up']);
    assert.deepEqual(forgotten, ['f2:1']);
    cluster.connect('f2');
    await cluster.clock.advance(1_000);
    assert.deepEqual(availability(cluster.leaderSink.states), ['f1-r1:up', 'f2-r1:up', 'leader-r1:up']);
    assertConverged(cluster);
  });

  it('a step of the wall clock neither makes live followers stale nor forgets a detached one early', async () => {
    const forgotten: string[] = [];
    cluster = startCluster(['f1', 'f2'], {
      forgetAfterMs: 60_000,
      onFollowerForgotten: (replica) => forgotten.push(replica),
    });
    await cluster.clock.advance(20);
    cluster.nodes.get('f2')!.link.closeBoth(1006, 'replica gone');
    await cluster.clock.advance(1_000);
    cluster.clock.stepWall(120_000); // NTP, or an operator, sets the leader's clock forward
    await cluster.clock.advance(2_000);
    assert.deepEqual(availability(cluster.leaderSink.states), ['f1-r1:up', 'f2-r1:up', 'leader-r1:up']);
    assert.deepEqual(forgotten, []);
    cluster.clock.stepWall(-600_000); // and back, further
    await cluster.clock.advance(59_000);
    assert.deepEqual(forgotten, ['f2'], 'forgotten forgetAfterMs after it left, on the monotonic clock');
  });

  it('never forgets a follower that stays connected, however long it is silent', async () => {
    cluster = startCluster(['f1', 'f2'], { forgetAfterMs: 60_000 });
    await cluster.clock.advance(20);
    cluster.nodes.get('f2')!.link.drop = (_msg, from) => from === 'b';
    await cluster.clock.advance(120_000);
    assert.deepEqual(availability(cluster.leaderSink.states), ['f1-r1:up', 'f2-r1:down', 'leader-r1:up']);
  });

  it('forgets a seeded part whose follower never reconnects, forgetAfterMs into the term', async () => {
    const seedParts = new Map([['f1', [runtimeState('f1-r1', 'f1')]]]);
    cluster = startCluster([], { seedParts, forgetAfterMs: 60_000 });
    await cluster.clock.advance(59_000);
    assert.deepEqual(availability(cluster.leaderSink.states), ['f1-r1:down', 'leader-r1:up']);
    await cluster.clock.advance(1_000);
    assert.deepEqual(availability(cluster.leaderSink.states), ['leader-r1:up']);
  });

  it('a new leader keeps seeded parts of followers that have not reconnected, until they go stale', async () => {
    const seedParts = new Map([
      ['f1', [runtimeState('f1-r1', 'f1')]],
      ['leader', [runtimeState('ghost', 'leader')]],
    ]);
    cluster = startCluster([], { seedParts });
    await cluster.clock.advance(1_000);
    assert.deepEqual(availability(cluster.leaderSink.states), ['f1-r1:up', 'leader-r1:up'], 'own seed is ignored');
    await cluster.clock.advance(10_000);
    assert.deepEqual(availability(cluster.leaderSink.states), ['f1-r1:down', 'leader-r1:up']);
  });

  it("a new leader commits its term's first epoch after the debounce, before any follower reconnects", async () => {
    const seedParts = new Map([['f1', [runtimeState('f1-r1', 'f1')]]]);
    cluster = startCluster([], { term: 2, startEpoch: 7, seedParts, cycleIntervalMs: 60_000 });
    await cluster.clock.advance(19);
    assert.equal(cluster.leader.latest(), undefined);
    await cluster.clock.advance(1);
    assert.deepEqual(cluster.leader.latest(), { epoch: 8, term: 2 });
    assert.deepEqual(availability(cluster.leaderSink.states), ['f1-r1:up', 'leader-r1:up']);
  });

  it('at most maxInFlight cycles wait at once', async () => {
    cluster = startCluster(['f1', 'f2']);
    await cluster.clock.advance(20);
    cluster.nodes.get('f2')!.link.drop = (_msg, from) => from === 'b';
    const seen: number[] = [];
    for (let i = 0; i < 48; i++) {
      cluster.leader.notifyChange();
      await cluster.clock.advance(250);
      seen.push(cluster.leader.inFlight);
    }
    assert.equal(Math.max(...seen), 5);
    assert.ok(cluster.leader.latest()!.epoch >= 1);
  });

  it('a part delta whose base the leader lacks is answered with resync part, then a full part', async () => {
    cluster = startCluster(['f1']);
    await cluster.clock.advance(20);
    const f1 = cluster.nodes.get('f1')!;
    f1.link.drop = (msg, from) => from === 'b' && msg.type === 'collect';
    addThread(cluster, 'f1', 'p1/t2');
    await cluster.clock.advance(20);
    f1.link.drop = undefined;
    addThread(cluster, 'f1', 'p1/t3');
    await cluster.clock.advance(100);
    assert.ok(f1.link.types('a').includes('resync'));
    const collects = f1.link.log.filter((e) => e.msg.type === 'collect' && e.fate === 'delivered');
    const kinds = collects.map((e) => (e.msg as Extract<SyncMessage, { type: 'collect' }>).part.kind);
    assert.equal(kinds.filter((k) => k === 'full').length, 2, 'a second full part after the resync');
    assert.ok(cluster.leaderSink.states.some((s) => s.threads.some((t) => t.thread === 't3')));
    assertConverged(cluster);
  });

  it('a follower whose connection refuses gets no deltas, then one delta from the epoch it took once it drains', async () => {
    cluster = startCluster(['f1', 'f2']);
    await cluster.clock.advance(20);
    const f2 = cluster.nodes.get('f2')!;
    f2.link.a.bufferedBytes = 9 * 1024 * 1024;
    addThread(cluster, 'f1', 'p1/t2');
    await cluster.clock.advance(40);
    addThread(cluster, 'f1', 'p1/t3');
    await cluster.clock.advance(40);
    assert.equal(cluster.leader.latest()?.epoch, 3);
    assert.equal(f2.sink.last?.epoch, 1, 'nothing sent while congested');
    f2.link.a.bufferedBytes = 0;
    await cluster.clock.advance(1000);
    assert.deepEqual(
      f2.sink.applied.map((a) => `${a.epoch}:${a.kind}`),
      ['1:snapshot', '3:delta'],
    );
    const last = commits(cluster, 'f2').at(-1)!;
    assert.equal(last.body.kind === 'delta' && last.body.baseEpoch, 1, 'the delta starts at the epoch it took');
    assertConverged(cluster);
  });

  it('a follower that missed commits is told its epoch is current only once it holds the latest', async () => {
    cluster = startCluster(['f1', 'f2']);
    await cluster.clock.advance(20);
    const f2 = cluster.nodes.get('f2')!;
    f2.link.a.bufferedBytes = 9 * 1024 * 1024;
    addThread(cluster, 'f1', 'p1/t2');
    await cluster.clock.advance(40);
    assert.equal(cluster.leader.latest()?.epoch, 2);
    assert.equal(f2.sink.last?.epoch, 1, 'epoch 2 was not sent');
    f2.link.a.bufferedBytes = 0;
    await cluster.clock.advance(1000); // the next cycle announces
    assert.ok(f2.sink.confirmed.length > 0, 'a cycle confirmed an epoch');
    assert.deepEqual(
      f2.sink.confirmed,
      f2.sink.confirmed.map(() => '1:2'),
      'never epoch 1 while the leader is at 2',
    );
    assertConverged(cluster);
  });

  for (const side of ['leader', 'follower'] as const) {
    it(`the ${side} keeps the last keepEpochs epochs and forgets older ones`, async () => {
      cluster = startCluster(['f1']);
      await cluster.clock.advance(20);
      for (let i = 2; i <= 8; i++) {
        addThread(cluster, 'f1', `p1/x${i}`);
        await cluster.clock.advance(40);
      }
      const holder = side === 'leader' ? cluster.leader : cluster.nodes.get('f1')!.follower;
      assert.equal(holder.latest()?.epoch, 8);
      const kept = [1, 2, 3, 4, 5, 6, 7, 8].filter((e) => holder.snapshotAt(e) !== undefined);
      assert.deepEqual(kept, [4, 5, 6, 7, 8]);
      const at6 = holder.snapshotAt(6)!;
      assert.ok(at6.some((s) => s.threads.some((t) => t.thread === 'x6')));
      assert.ok(!at6.some((s) => s.threads.some((t) => t.thread === 'x7')));
    });
  }

  for (const side of ['leader', 'follower'] as const) {
    it(`the ${side} hands out a kept epoch as kept, not a copy, and it stays as committed`, async () => {
      cluster = startCluster(['f1']);
      await cluster.clock.advance(20);
      addThread(cluster, 'f1', 'p1/x2');
      await cluster.clock.advance(40);
      const holder = side === 'leader' ? cluster.leader : cluster.nodes.get('f1')!.follower;
      const at2 = holder.snapshotAt(2)!;
      const committed = JSON.stringify(at2);
      // A copy of a large fleet blocks the event loop for seconds (GET /api/epoch/:id/snapshot).
      assert.equal(holder.snapshotAt(2), at2, 'the same state, not a copy of it');
      for (let i = 3; i <= 5; i++) {
        addThread(cluster, 'f1', `p1/x${i}`);
        await cluster.clock.advance(40);
      }
      assert.equal(holder.latest()?.epoch, 5);
      assert.equal(holder.snapshotAt(2), at2);
      assert.equal(JSON.stringify(at2), committed, 'later epochs leave it as it was committed');
    });
  }

  it('a follower that reconnects to the same leader keeps the epochs it had (the snapshot repeats its latest)', async () => {
    cluster = startCluster(['f1']);
    await cluster.clock.advance(20);
    for (let i = 2; i <= 4; i++) {
      addThread(cluster, 'f1', `p1/x${i}`);
      await cluster.clock.advance(40);
    }
    const follower = cluster.nodes.get('f1')!.follower;
    const kept = (): number[] => [1, 2, 3, 4].filter((e) => follower.snapshotAt(e) !== undefined);
    assert.deepEqual(kept(), [1, 2, 3, 4]);
    cluster.nodes.get('f1')!.link.closeBoth(1006, 'connection lost');
    await cluster.clock.advance(1);
    cluster.connect('f1');
    await cluster.clock.advance(40);
    assert.deepEqual(follower.latest(), { epoch: 4, term: 1 });
    assert.deepEqual(kept(), [1, 2, 3, 4]);
  });

  it('stop() is idempotent, clears every timer and closes follower connections', async () => {
    cluster = startCluster(['f1']);
    await cluster.clock.advance(20);
    cluster.leader.stop();
    cluster.leader.stop();
    cluster.nodes.get('f1')!.follower.stop();
    assert.equal(cluster.clock.pendingTimers, 0);
    assert.equal(cluster.nodes.get('f1')!.link.a.closed?.code, 1001);
  });
});
