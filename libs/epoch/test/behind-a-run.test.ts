// A run of parts blocked every other message until its last frame was written. A follower that needed a snapshot
// bigger than its connection's buffer therefore missed the announce the leader sends right after it at a cycle's
// start, and the delta it commits moments later; refused, that delta made the leader send a snapshot again at the
// next cycle, right before its announce. While the cluster changed every cycle, the follower got a whole snapshot
// each cycle and never an announce: it could not send its part, and its runtimes stayed out of the epochs.
// Messages sent during a run now wait behind it (bounded), and the leader does not wait for a follower behind one.
// Real WebSockets on loopback; the follower's socket is paused, as a slow reader's, while the run starts.
import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { WebSocket } from 'ws';
import { ManualClock } from '@switchyard/clock/testing';
import type { SyncMessage } from '@switchyard/protocol';
import { EpochLeader, wsSyncConnection } from '@switchyard/epoch';
import type { SyncConnection } from '@switchyard/epoch';
import { referenceApply, referenceDiff, referenceMerge } from '@switchyard/epoch/testing';
import { recordingFollower, runtimeState } from './support/cluster.ts';
import { fleet, pausedSocketPair, snapshotCommit } from './support/runs.ts';
import { pollUntil } from './support/until.ts';

const BUFFERED_BYTES_MAX = 256 * 1024;
const PART_BYTES = 64 * 1024;

const until = (check: () => boolean, what: string, timeoutMs = 10_000): Promise<void> =>
  pollUntil(check, what, timeoutMs);

describe('messages sent while a run of parts goes out', () => {
  const closers: Array<() => unknown> = [];
  after(async () => {
    for (const close of closers.reverse()) await close();
  });

  const connection = (ws: WebSocket): SyncConnection =>
    wsSyncConnection(ws, { bufferedBytesMax: BUFFERED_BYTES_MAX, partBytes: PART_BYTES });

  it('wait behind it and follow it in order, up to bufferedBytesMax of them', async () => {
    const { server, client } = await pausedSocketPair(closers);
    const sender = connection(server);
    const got: SyncMessage[] = [];
    connection(client).onMessage((msg) => got.push(msg));
    assert.equal(sender.send(snapshotCommit(1, fleet(50))), true);
    await until(() => sender.bufferedBytes > BUFFERED_BYTES_MAX, 'the sender blocked on the paused reader');
    assert.equal(sender.send({ type: 'announce', term: 1, epoch: 2 }), true, 'the announce waits behind the run');
    assert.equal(sender.backlogged, true);
    assert.equal(sender.send(snapshotCommit(2, fleet(50))), false, 'a second run is refused');
    const big = 'x'.repeat(BUFFERED_BYTES_MAX);
    assert.equal(sender.send({ type: 'error', term: 1, epoch: 2, reason: big }), false, 'past the bound: refused');
    // Once one is refused, every later one is, until the run is out: none may overtake a refused one.
    assert.equal(sender.send({ type: 'announce', term: 1, epoch: 3 }), false, 'refused after a refusal');
    client.resume();
    await until(() => got.length === 2, 'the run and the announce');
    assert.deepEqual(
      got.map((m) => m.type),
      ['commit', 'announce'],
    );
    assert.deepEqual(got[1], { type: 'announce', term: 1, epoch: 2 });
    await until(() => sender.backlogged === false, 'the run out');
    assert.equal(sender.send({ type: 'announce', term: 1, epoch: 4 }), true);
    await until(() => got.length === 3, 'an announce after the run');
  });

  it('a follower behind a snapshot run gets the announce and the delta after it, and reports its part', async () => {
    const clock = new ManualClock();
    let part = fleet(50);
    const leader = new EpochLeader({
      replicaId: 'leader',
      term: 1,
      clock,
      localPart: () => part,
      merge: referenceMerge,
      diff: referenceDiff,
      apply: referenceApply,
    });
    closers.push(() => leader.stop());
    await clock.advance(1000);
    assert.ok(leader.latest(), 'the first epoch');
    const { server, client } = await pausedSocketPair(closers);
    const leaderSide = connection(server);
    const { follower, sink } = recordingFollower('slow', () => [runtimeState('slow-r1', 'slow', ['p1/t1'])]);
    closers.push(() => follower.stop());
    follower.attach(connection(client));
    leader.attach(leaderSide, 'slow');
    await until(() => leaderSide.bufferedBytes > BUFFERED_BYTES_MAX, 'the snapshot run blocked on the follower');
    // The cluster changes while the run goes out: the next cycle announces and commits a delta at once.
    part = [...part, runtimeState('leader-extra', 'leader', ['p2/t2'])];
    await clock.advance(1000);
    const changed = leader.latest()!.epoch;
    assert.equal(leader.inFlight, 0, 'the cycle did not wait for the follower behind the run');
    client.resume();
    await until(() => sink.last?.epoch === changed, `epoch ${changed} at the follower`);
    assert.deepEqual(
      sink.applied.map((a) => a.kind),
      ['snapshot', 'delta'],
    );
    // The announce came after the snapshot: the follower answers it with its part, which the next commit holds.
    const holdsFollower = (): boolean => leader.latestStates()!.some((s) => s.runtime.id === 'slow-r1');
    for (let i = 0; i < 100 && !holdsFollower(); i++) {
      await new Promise((resolve) => setTimeout(resolve, 10));
      await clock.advance(100);
    }
    assert.ok(holdsFollower(), "the follower's runtime in the leader's epoch");
  });
});
