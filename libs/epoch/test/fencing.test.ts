import { afterEach, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { ManualClock } from '@switchyard/clock/testing';
import type { RuntimeState, SyncMessage } from '@switchyard/protocol';
import { EpochLeader } from '@switchyard/epoch';
import { MemoryLink, referenceApply, referenceDiff, referenceMerge } from '@switchyard/epoch/testing';
import { recordingFollower, runtimeState, startCluster } from './support/cluster.ts';
import type { Cluster, RecordingSink } from './support/cluster.ts';
import type { RejectInfo, EpochFollower } from '@switchyard/epoch';

const emptySnapshot = (term: number, epoch: number): SyncMessage => ({
  type: 'commit',
  term,
  epoch,
  body: { kind: 'snapshot', snapshot: { epoch, term, runtimes: [] } },
});

/** Follower f1 on a manual clock, with the reference merge, recording what reaches its sink and what it rejects. */
function manualFollower(localPart: () => RuntimeState[] = () => []) {
  const clock = new ManualClock();
  const rejects: RejectInfo[] = [];
  const { follower, sink } = recordingFollower('f1', localPart, { clock, onReject: (info) => rejects.push(info) });
  return { clock, sink, rejects, follower };
}

describe('fencing', () => {
  const lowerTermCases: Array<{ name: string; msg: SyncMessage }> = [
    { name: 'an announce', msg: { type: 'announce', term: 2, epoch: 9 } },
    { name: 'a snapshot commit', msg: emptySnapshot(2, 9) },
    {
      name: 'a delta commit',
      msg: { type: 'commit', term: 2, epoch: 2, body: { kind: 'delta', baseEpoch: 1, ops: [] } },
    },
    { name: 'a resync request', msg: { type: 'resync', term: 2, what: 'part' } },
  ];
  for (const { name, msg } of lowerTermCases) {
    it(`a follower that saw term 3 rejects ${name} of term 2 and answers with an error`, async () => {
      const { clock, sink, rejects, follower } = manualFollower();
      const link = new MemoryLink();
      follower.attach(link.b);
      link.a.send(emptySnapshot(3, 1));
      link.a.send(msg);
      await clock.advance(1);
      assert.deepEqual(
        sink.applied.map((a) => `${a.term}:${a.epoch}`),
        ['3:1'],
      );
      assert.equal(rejects.length, 1);
      assert.equal(rejects[0]!.term, 2);
      const errors = link.log.filter((e) => e.from === 'b' && e.msg.type === 'error');
      assert.equal(errors.length, 1);
      assert.equal(errors[0]!.msg.term, 3, 'the error tells the old leader the newer term');
      assert.equal(link.types('b').includes('collect'), false);
      follower.stop();
    });
  }

  it('no commit of a lower term accepted: a delayed commit of an old leader on a still-open connection is fenced', async () => {
    const { clock, sink, rejects, follower } = manualFollower(() => [runtimeState('f1-r1', 'f1')]);
    const leaderErrors: number[] = [];
    const threads = new Map<number, string[]>();
    const makeLeader = (term: number, startEpoch: number, ownRuntime: string): EpochLeader =>
      new EpochLeader({
        replicaId: `l${term}`,
        term,
        startEpoch,
        clock,
        localPart: () => [runtimeState(ownRuntime, `l${term}`, threads.get(term))],
        merge: referenceMerge,
        diff: referenceDiff,
        apply: referenceApply,
        onFollowerError: (_replica, errTerm) => leaderErrors.push(errTerm),
      });
    const old = makeLeader(2, 0, 'old-r1');
    const oldLink = new MemoryLink();
    follower.attach(oldLink.b);
    old.attach(oldLink.a, 'f1');
    await clock.advance(20);
    assert.deepEqual(follower.latest(), { epoch: 1, term: 2 });

    oldLink.hold('a'); // the old leader's traffic is delayed in the network
    threads.set(2, ['p1/t1']);
    old.notifyChange();
    await clock.advance(6000); // the old leader times out waiting and commits epoch 2 into the held queue
    assert.equal(old.latest()?.epoch, 2);

    const next = makeLeader(3, 1, 'new-r1');
    const newLink = new MemoryLink();
    follower.attach(newLink.b);
    next.attach(newLink.a, 'f1');
    await clock.advance(20);
    assert.deepEqual(follower.latest(), { epoch: 2, term: 3 });

    oldLink.release('a');
    await clock.advance(1);
    assert.deepEqual(follower.latest(), { epoch: 2, term: 3 }, 'the old commit did not land');
    assert.ok(sink.applied.every((a, i) => i === 0 || a.term >= sink.applied[i - 1]!.term));
    assert.ok(!sink.last!.state.includes('old-r1'));
    assert.ok(rejects.some((r) => r.type === 'commit' && r.term === 2 && r.epoch === 2));
    assert.ok(leaderErrors.includes(3), 'the old leader learns of term 3');
    old.stop();
    next.stop();
    follower.stop();
  });
});

describe('one history per term', () => {
  const snapshotOf = (term: number, epoch: number, owner: string): SyncMessage => ({
    type: 'commit',
    term,
    epoch,
    body: { kind: 'snapshot', snapshot: { epoch, term, runtimes: [runtimeState(`${owner}-r1`, owner)] } },
  });
  const deltaOf = (term: number, epoch: number): SyncMessage => ({
    type: 'commit',
    term,
    epoch,
    body: { kind: 'delta', baseEpoch: epoch - 1, ops: [{ op: 'runtime.remove', runtimeId: 'a-r1' }] },
  });

  /** A follower holding epoch 4 of term 1 from leader `a`, then attached to a new link (a new leader). */
  async function heldFourOfTermOne(): Promise<{
    clock: ManualClock;
    sink: RecordingSink;
    rejects: RejectInfo[];
    follower: EpochFollower;
    link: MemoryLink;
  }> {
    const { clock, sink, rejects, follower } = manualFollower();
    const first = new MemoryLink();
    follower.attach(first.b);
    first.a.send(snapshotOf(1, 4, 'a'));
    await clock.advance(1);
    const link = new MemoryLink();
    follower.attach(link.b);
    return { clock, sink, rejects, follower, link };
  }

  const secondHistories = [
    { name: 'an epoch below the one it holds', epoch: 2 },
    { name: 'the epoch it holds with other content', epoch: 4 },
  ];
  for (const { name, epoch } of secondHistories) {
    it(`a new leader's snapshot of the follower's term at ${name} fences the term off, naming the term above`, async () => {
      const { clock, sink, rejects, follower, link } = await heldFourOfTermOne();
      link.a.send(snapshotOf(1, epoch, 'b'));
      link.a.send(deltaOf(1, 5)); // would apply to epoch 4 of the other history
      link.a.send({ type: 'announce', term: 1, epoch: 6 });
      await clock.advance(1);
      assert.deepEqual(
        sink.applied.map((a) => `${a.term}:${a.epoch}`),
        ['1:4'],
        'neither taken nor mixed in',
      );
      assert.deepEqual(follower.latest(), { epoch: 4, term: 1 });
      assert.equal(follower.term, 2);
      assert.deepEqual(
        rejects.map((r) => `${r.type}:${r.term}:${r.epoch}`),
        [`commit:1:${epoch}`, 'commit:1:5', 'announce:1:6'],
      );
      const errors = link.log.filter((e) => e.from === 'b' && e.msg.type === 'error').map((e) => e.msg.term);
      assert.deepEqual(errors, [2, 2, 2], 'the leader hears of the term above its own');
      assert.deepEqual(sink.confirmed, [], 'nothing confirmed current');

      link.a.send(snapshotOf(2, 3, 'b')); // the leader again, above the fenced term
      await clock.advance(1);
      assert.deepEqual(follower.latest(), { epoch: 3, term: 2 });
      assert.ok(sink.last!.state.includes('b-r1'));
      follower.stop();
    });
  }

  it('the same epoch with the same content (a reconnect to the same leader) is taken as a repeat', async () => {
    const { clock, sink, rejects, follower, link } = await heldFourOfTermOne();
    link.a.send(snapshotOf(1, 4, 'a'));
    await clock.advance(1);
    assert.deepEqual(rejects, []);
    assert.deepEqual(follower.latest(), { epoch: 4, term: 1 });
    assert.equal(follower.term, 1);
    assert.equal(sink.applied.length, 2);
    follower.stop();
  });

  it("an epoch of the replica's own leadership (adopt) fences off a second leader of its term", async () => {
    const { clock, sink, follower } = manualFollower();
    follower.adopt({ epoch: 4, term: 1 }, [runtimeState('f1-r1', 'f1')]);
    assert.deepEqual(follower.latest(), { epoch: 4, term: 1 });
    assert.deepEqual(follower.snapshotAt(4), [runtimeState('f1-r1', 'f1')]);
    const link = new MemoryLink();
    follower.attach(link.b);
    link.a.send(snapshotOf(0, 9, 'old')); // the leader before ours is fenced off too
    link.a.send(snapshotOf(1, 1, 'b'));
    await clock.advance(1);
    assert.deepEqual(sink.applied, [], 'the view keeps what its own leader committed');
    assert.equal(follower.term, 2);
    follower.stop();
  });
});

type Step =
  | { kind: 'change'; who: number; thread: number; add: boolean }
  | { kind: 'advance'; ms: number }
  | { kind: 'reconnect'; who: number }
  | { kind: 'disconnect'; who: number }
  | { kind: 'lose'; who: number; from: 'a' | 'b'; type: SyncMessage['type'] | 'any'; count: number };

const REPLICAS = ['f1', 'f2', 'f3'];
const stepArb: fc.Arbitrary<Step> = fc.oneof(
  {
    weight: 4,
    arbitrary: fc.record({
      kind: fc.constant('change' as const),
      who: fc.nat(3),
      thread: fc.nat(5),
      add: fc.boolean(),
    }),
  },
  {
    weight: 4,
    arbitrary: fc.record({ kind: fc.constant('advance' as const), ms: fc.constantFrom(1, 20, 50, 1000, 5000, 11_000) }),
  },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('reconnect' as const), who: fc.nat(2) }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('disconnect' as const), who: fc.nat(2) }) },
  {
    weight: 2,
    arbitrary: fc.record({
      kind: fc.constant('lose' as const),
      who: fc.nat(2),
      from: fc.constantFrom('a' as const, 'b' as const),
      type: fc.constantFrom('any' as const, 'commit' as const, 'collect' as const, 'resync' as const),
      count: fc.integer({ min: 1, max: 3 }),
    }),
  },
);

function toggle(threads: readonly string[], thread: string, add: boolean): string[] {
  const rest = threads.filter((t) => t !== thread);
  return add ? [...rest, thread] : rest;
}

describe('epoch content under random schedules', () => {
  let cluster: Cluster | undefined;
  afterEach(() => cluster?.stop());

  it('no two commits of one epoch number differ, and all replicas converge once the network heals', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(stepArb, { minLength: 5, maxLength: 40 }), async (steps) => {
        cluster?.stop();
        const c = startCluster(REPLICAS);
        cluster = c;
        const threads = new Map<number, string[]>();
        for (const step of steps) {
          if (step.kind === 'advance') await c.clock.advance(step.ms);
          else if (step.kind === 'change') {
            const owner = step.who === 3 ? 'leader' : REPLICAS[step.who]!;
            const next = toggle(threads.get(step.who) ?? ['p1/t1'], `p1/x${step.thread}`, step.add);
            threads.set(step.who, next);
            const part = [runtimeState(`${owner}-r1`, owner, next)];
            if (step.who === 3) {
              c.leaderPart = part;
              c.leader.notifyChange();
            } else {
              c.nodes.get(owner)!.part = part;
              c.nodes.get(owner)!.follower.notifyChange();
            }
          } else if (step.kind === 'reconnect') c.connect(REPLICAS[step.who]!);
          else if (step.kind === 'disconnect') c.nodes.get(REPLICAS[step.who]!)!.link.a.close(1001, 'gone');
          else {
            let left = step.count;
            c.nodes.get(REPLICAS[step.who]!)!.link.drop = (m, from) =>
              from === step.from && (step.type === 'any' || m.type === step.type) && left-- > 0;
          }
        }
        // Heal: reconnect everyone, let a few cycles run.
        for (const replica of REPLICAS) c.connect(replica);
        await c.clock.advance(3000);

        const byEpoch = new Map<string, string>();
        for (const sink of [c.leaderSink, ...[...c.nodes.values()].map((n) => n.sink)]) {
          for (const a of sink.applied) {
            const key = `${a.term}/${a.epoch}`;
            const seen = byEpoch.get(key);
            if (seen !== undefined) assert.equal(a.state, seen, `epoch ${key} has one content`);
            else byEpoch.set(key, a.state);
          }
        }
        for (const node of c.nodes.values()) {
          assert.equal(node.sink.last?.state, c.leaderSink.last?.state, `${node.replica} converged`);
          assert.equal(node.sink.last?.epoch, c.leader.latest()?.epoch);
        }
      }),
      { numRuns: 150 },
    );
  });
});
