// Replicas of this release publish with each runtime the instance id its process dialled with; replicas of
// earlier releases validate sync messages strictly and close on a field they do not know, among them those of
// the release before, which read join token fingerprints but not instances. So each side sends the instance only
// to a peer that lists it in `X-Switchyard-Sync-Features`, and still sends a fingerprint to one that lists that
// alone. Real WebSockets on loopback.
import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { AddressInfo } from 'node:net';
import { WebSocket, WebSocketServer } from 'ws';
import { SYNC_FEATURES, SYNC_FEATURES_HEADER } from '@switchyard/protocol';
import type { RuntimeState } from '@switchyard/protocol';
import type { EpochFollower } from '@switchyard/epoch';
import { connectSync, wsSyncConnection } from '@switchyard/epoch';
import type { RecordingSink } from './support/cluster.ts';
import { recordingFollower, runtimeState } from './support/cluster.ts';
import { serveReferenceLeader } from './support/serve-leader.ts';
import { pollUntil } from './support/until.ts';

const FP = 'AAAAAAAAAAAAAAAA';
const INSTANCE = 'instance-0123456789ab';
/** What a replica of the release before this one lists: fingerprints and parts, no instances. */
const PREVIOUS_FEATURES = [SYNC_FEATURES.latestEpoch, SYNC_FEATURES.tokenFingerprint, SYNC_FEATURES.parts].join(', ');

const until = (check: () => boolean, what: string, timeoutMs = 3000): Promise<void> =>
  pollUntil(check, what, timeoutMs);

/** A runtime held by `owner`, with a fingerprint and, unless held by a replica of the release before, an instance. */
function held(id: string, owner: string, withInstance = true): RuntimeState {
  const state = runtimeState(id, owner);
  return {
    ...state,
    runtime: { ...state.runtime, tokenFingerprint: FP, ...(withInstance ? { instance: INSTANCE } : {}) },
  };
}

describe('runtime instances in epoch sync, across releases', () => {
  const closers: Array<() => Promise<unknown> | void> = [];
  after(async () => {
    for (const close of closers.reverse()) await close();
  });

  function follower(replica: string, withInstance = true): { follower: EpochFollower; sink: RecordingSink } {
    const made = recordingFollower(replica, () => [held(`${replica}-r1`, replica, withInstance)]);
    closers.push(() => made.follower.stop());
    return made;
  }

  /** A leader of this release whose own runtime carries an instance; its base URL. */
  function leader(): Promise<string> {
    return serveReferenceLeader(() => [held('leader-r1', 'leader')], closers);
  }

  it('a follower of this release gets them from a leader of this release, and sends its own', async () => {
    const { follower: f, sink } = follower('new');
    f.attach(await connectSync(await leader(), 'new'));
    await until(() => sink.states.length === 2, 'both runtimes committed');
    assert.deepEqual(
      sink.states.map((s) => s.runtime.instance),
      [INSTANCE, INSTANCE],
    );
  });

  it('a follower of the release before (fingerprints listed, not instances) gets fingerprints only', async () => {
    const base = await leader();
    const ws = new WebSocket(`${base.replace('http', 'ws')}/api/sync/previous`, {
      perMessageDeflate: false,
      headers: { [SYNC_FEATURES_HEADER]: PREVIOUS_FEATURES },
    });
    const frames: string[] = [];
    ws.on('message', (data) => frames.push(data.toString()));
    await new Promise((resolve, reject) => ws.once('open', resolve).once('error', reject));
    const { follower: f, sink } = follower('previous', false);
    f.attach(wsSyncConnection(ws, { peerReadsInstance: false }));
    await until(() => sink.states.length === 2, 'both runtimes committed');
    assert.ok(
      frames.some((f) => f.includes('"commit"')),
      'commits arrived',
    );
    assert.ok(!frames.some((f) => f.includes('"instance"')), 'no frame carried an instance');
    assert.deepEqual(
      sink.states.map((s) => s.runtime.tokenFingerprint),
      [FP, FP],
      'fingerprints still came',
    );
  });

  it('a follower of this release sends none to a leader of the release before (instances not listed)', async () => {
    const previous = new WebSocketServer({ port: 0, host: '127.0.0.1' });
    closers.push(() => new Promise((resolve) => previous.close(resolve)));
    await new Promise((resolve) => previous.once('listening', resolve));
    previous.on('headers', (headers) => headers.push(`${SYNC_FEATURES_HEADER}: ${PREVIOUS_FEATURES}`));
    const frames: string[] = [];
    previous.on('connection', (ws) => {
      ws.on('message', (data) => frames.push(data.toString()));
      ws.send(JSON.stringify({ type: 'announce', term: 1, epoch: 1 }));
    });
    const { follower: f } = follower('new2');
    f.attach(await connectSync(`http://127.0.0.1:${(previous.address() as AddressInfo).port}`, 'new2'));
    await until(() => frames.some((f) => f.includes('"collect"')), 'the collect');
    const collect = JSON.parse(frames.find((f) => f.includes('"collect"'))!) as {
      part: { runtimes: RuntimeState[] };
    };
    const { runtime } = collect.part.runtimes[0]!;
    assert.equal(runtime.id, 'new2-r1');
    assert.ok(!('instance' in runtime), JSON.stringify(runtime));
    assert.equal(runtime.tokenFingerprint, FP, 'the fingerprint still went');
  });
});
