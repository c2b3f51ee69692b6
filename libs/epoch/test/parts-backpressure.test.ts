// A run of parts was written to the socket in one go, its `bufferedBytesMax` checked only before it: a leader
// whose followers all needed a snapshot of S bytes held about followers × S in socket buffers at once. A run now
// goes out a part at a time, each once the buffer is back under the bound, and `send` refuses another run
// until the run is out. Real WebSockets on loopback; the receiving socket is paused, as a slow reader's.
// States are compared as canonical strings, runs by count: an assertion's diff of a whole fleet takes minutes.
import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { WebSocket } from 'ws';
import { systemClock } from '@switchyard/clock';
import type { SyncMessage } from '@switchyard/protocol';
import { EpochLeader, wsSyncConnection } from '@switchyard/epoch';
import type { SyncConnection } from '@switchyard/epoch';
import { canonicalStates, referenceApply, referenceDiff, referenceMerge } from '@switchyard/epoch/testing';
import { recordingFollower } from './support/cluster.ts';
import { fleet, pausedSocketPair, snapshotCommit } from './support/runs.ts';
import { pollUntil } from './support/until.ts';

const BUFFERED_BYTES_MAX = 256 * 1024;
const PART_BYTES = 64 * 1024;
/** A frame's WebSocket header, and what a part may take past `PART_BYTES` (one runtime's fields). */
const FRAME_SLACK_BYTES = 1024;

const until = (check: () => boolean, what: string, timeoutMs = 20_000): Promise<void> =>
  pollUntil(check, what, timeoutMs);

describe('a run of parts goes out with backpressure', () => {
  const closers: Array<() => unknown> = [];
  after(async () => {
    for (const close of closers.reverse()) await close();
  });

  /** `ws.bufferedAmount` right after each frame `ws.send` writes: its highest values. */
  function sampleBuffered(ws: WebSocket): { readonly max: number; readonly frames: number } {
    const seen = { max: 0, frames: 0 };
    const send = ws.send.bind(ws) as (data: string, cb?: (err?: Error) => void) => void;
    (ws as unknown as { send: typeof send }).send = (data, cb) => {
      send(data, cb);
      seen.frames++;
      seen.max = Math.max(seen.max, ws.bufferedAmount);
    };
    return seen;
  }

  const connection = (ws: WebSocket): SyncConnection =>
    wsSyncConnection(ws, { bufferedBytesMax: BUFFERED_BYTES_MAX, partBytes: PART_BYTES });

  /** A sync connection on a paused reader, its buffer sampled at each frame, and what the reader receives. */
  async function sampledLink() {
    const { server, client } = await pausedSocketPair(closers);
    const sampled = sampleBuffered(server);
    const sender = connection(server);
    const receiver = connection(client);
    const got: SyncMessage[] = [];
    receiver.onMessage((msg) => got.push(msg));
    return { client, sampled, sender, receiver, got };
  }

  it('holds at most bufferedBytesMax and a part buffered, and a slow reader gets the whole run', async () => {
    const { client, sampled, sender, got } = await sampledLink();
    // Some 11 MB: far above the bound, and above what loopback's socket buffers take from a reader that is paused.
    const runtimes = fleet(50);
    assert.equal(sender.send(snapshotCommit(1, runtimes)), true);
    await until(() => sender.bufferedBytes > BUFFERED_BYTES_MAX, 'the sender blocked on the paused reader');
    assert.equal(sender.send(snapshotCommit(2, runtimes)), false, 'a second run is refused within the run');
    client.resume();
    await until(() => got.length > 0, 'the run, whole');
    assert.ok(sampled.frames > 100, `${sampled.frames} frames`);
    assert.ok(
      sampled.max <= BUFFERED_BYTES_MAX + PART_BYTES + FRAME_SLACK_BYTES,
      `at most ${sampled.max} bytes buffered`,
    );
    const [commit] = got as [Extract<SyncMessage, { type: 'commit' }>];
    assert.equal(commit.body.kind, 'snapshot');
    const same =
      commit.body.kind === 'snapshot' && canonicalStates(commit.body.snapshot.runtimes) === canonicalStates(runtimes);
    assert.ok(same, 'the run makes the snapshot sent');
    // Once the run is out, messages go again, after it.
    await until(() => sender.send({ type: 'announce', term: 1, epoch: 2 }), 'a send accepted after the run');
    await until(() => got.length === 2, 'the announce');
    assert.deepEqual(got[1], { type: 'announce', term: 1, epoch: 2 });
  });

  it('a close mid-run drops the rest of it', async () => {
    const { client, sampled, sender, receiver, got } = await sampledLink();
    const closed = new Promise<number>((resolve) => receiver.onClose((code) => resolve(code)));
    assert.equal(sender.send(snapshotCommit(1, fleet(50))), true);
    await until(() => sender.bufferedBytes > BUFFERED_BYTES_MAX, 'the sender blocked on the paused reader');
    const written = sampled.frames;
    sender.close(1000, 'done');
    client.resume();
    assert.equal(await closed, 1000);
    assert.equal(sampled.frames, written, 'no frame written after the close');
    assert.equal(got.length, 0, 'an unfinished run makes no message');
  });

  it('a follower that reads slowly during a snapshot run ends at the leader’s latest epoch', async () => {
    let part = fleet(50);
    const leader = new EpochLeader({
      replicaId: 'leader',
      term: 1,
      clock: systemClock,
      localPart: () => part,
      merge: referenceMerge,
      diff: referenceDiff,
      apply: referenceApply,
      cycleIntervalMs: 50,
      debounceMs: 5,
    });
    closers.push(() => leader.stop());
    const { server, client } = await pausedSocketPair(closers);
    const leaderSide = connection(server);
    const { follower, sink } = recordingFollower('slow', () => []);
    closers.push(() => follower.stop());
    follower.attach(connection(client));
    await until(() => leader.latest() !== undefined, 'the first epoch');
    leader.attach(leaderSide, 'slow');
    await until(() => leaderSide.bufferedBytes > BUFFERED_BYTES_MAX, 'the snapshot run blocked on the follower');
    // A delta meanwhile (a runtime of 220 KB) passes what may wait behind the run: refused, it reaches the follower
    // after the run as a delta from the snapshot's epoch.
    const blocked = leader.latest()!.epoch;
    part = fleet(51);
    leader.notifyChange();
    await until(() => leader.latest()!.epoch > blocked, 'a commit during the run');
    client.resume();
    await until(() => sink.last?.epoch === leader.latest()!.epoch, "the leader's latest epoch");
    assert.ok(canonicalStates(sink.states) === canonicalStates(leader.latestStates()!), "the leader's state");
    assert.deepEqual(
      sink.applied.map((a) => a.kind),
      ['snapshot', 'delta'],
    );
  });
});
