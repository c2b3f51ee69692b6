// Replicas of this release publish with each runtime the fingerprint of the join token its tunnel came with;
// replicas of earlier releases validate sync messages strictly and close on a field they do not know. So each
// side sends it only to a peer that lists it in `X-Switchyard-Sync-Features`, over real WebSockets on loopback.
import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { AddressInfo } from 'node:net';
import { WebSocket, WebSocketServer } from 'ws';
import type { RuntimeState } from '@switchyard/protocol';
import type { EpochFollower } from '@switchyard/epoch';
import { connectSync, wsSyncConnection } from '@switchyard/epoch';
import type { RecordingSink } from './support/cluster.ts';
import { recordingFollower, runtimeState } from './support/cluster.ts';
import { serveReferenceLeader } from './support/serve-leader.ts';
import { pollUntil } from './support/until.ts';

const FP = 'AAAAAAAAAAAAAAAA';

const until = (check: () => boolean, what: string, timeoutMs = 3000): Promise<void> =>
  pollUntil(check, what, timeoutMs);

function claimed(id: string, owner: string): RuntimeState {
  const state = runtimeState(id, owner);
  return { ...state, runtime: { ...state.runtime, tokenFingerprint: FP } };
}

describe('join token fingerprints in epoch sync, across releases', () => {
  const closers: Array<() => Promise<unknown> | void> = [];
  after(async () => {
    for (const close of closers.reverse()) await close();
  });

  function follower(replica: string): { follower: EpochFollower; sink: RecordingSink } {
    const made = recordingFollower(replica, () => [claimed(`${replica}-r1`, replica)]);
    closers.push(() => made.follower.stop());
    return made;
  }

  /** A leader of this release whose own runtime carries a fingerprint; its base URL. */
  function leader(): Promise<string> {
    return serveReferenceLeader(() => [claimed('leader-r1', 'leader')], closers);
  }

  it('a follower of this release gets them from a leader of this release, and sends its own', async () => {
    const { follower: f, sink } = follower('new');
    f.attach(await connectSync(await leader(), 'new'));
    await until(() => sink.states.length === 2, 'both runtimes committed');
    assert.deepEqual(
      sink.states.map((s) => s.runtime.tokenFingerprint),
      [FP, FP],
    );
  });

  it('a follower of an earlier release (no features listed) gets none from a leader of this release', async () => {
    const base = await leader();
    // As an earlier release dials: no features header.
    const ws = new WebSocket(`${base.replace('http', 'ws')}/api/sync/old`, { perMessageDeflate: false });
    const frames: string[] = [];
    ws.on('message', (data) => frames.push(data.toString()));
    await new Promise((resolve, reject) => ws.once('open', resolve).once('error', reject));
    const { follower: f, sink } = follower('old');
    f.attach(wsSyncConnection(ws, { peerReadsLatestEpoch: false, peerReadsTokenFingerprint: false }));
    await until(() => sink.states.length === 2, 'both runtimes committed');
    assert.ok(
      frames.some((f) => f.includes('"commit"')),
      'commits arrived',
    );
    assert.ok(!frames.some((f) => f.includes('tokenFingerprint')), 'no frame carried a fingerprint');
  });

  it('a follower of this release sends none to a leader of an earlier release (no features listed)', async () => {
    const older = new WebSocketServer({ port: 0, host: '127.0.0.1' });
    closers.push(() => new Promise((resolve) => older.close(resolve)));
    await new Promise((resolve) => older.once('listening', resolve));
    const frames: string[] = [];
    older.on('connection', (ws) => {
      ws.on('message', (data) => frames.push(data.toString()));
      ws.send(JSON.stringify({ type: 'announce', term: 1, epoch: 1 }));
    });
    const { follower: f } = follower('new2');
    f.attach(await connectSync(`http://127.0.0.1:${(older.address() as AddressInfo).port}`, 'new2'));
    await until(() => frames.some((f) => f.includes('"collect"')), 'the collect');
    const collect = JSON.parse(frames.find((f) => f.includes('"collect"'))!) as {
      part: { runtimes: RuntimeState[] };
    };
    assert.equal(collect.part.runtimes[0]!.runtime.id, 'new2-r1');
    assert.ok(!('tokenFingerprint' in collect.part.runtimes[0]!.runtime));
  });
});
