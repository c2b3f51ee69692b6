// What a receiver gathers for an unfinished run of parts is held until the run ends. Each frame is within
// epoch.frameBytesMax, but nothing else bounded their sum: a peer that kept sending parts (a fault, or a
// hostile replica) grew the receiver's memory until it died. `runBytesMax` bounds a run's frames together.
import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { AddressInfo } from 'node:net';
import { WebSocket, WebSocketServer } from 'ws';
import { systemClock } from '@switchyard/clock';
import { SYNC_FEATURES, SYNC_FEATURES_HEADER } from '@switchyard/protocol';
import type { RuntimeState } from '@switchyard/protocol';
import { EpochLeader, connectSync } from '@switchyard/epoch';
import { referenceApply, referenceDiff, referenceMerge } from '@switchyard/epoch/testing';
import { recordingFollower, runtimeState } from './support/cluster.ts';
import { serveLeader } from './support/serve-leader.ts';
import { pollUntil } from './support/until.ts';

/** A run's frames may take this many bytes together, in these tests. */
const RUN_BYTES_MAX = 16 * 1024;

const until = (check: () => boolean, what: string, timeoutMs = 5000): Promise<void> =>
  pollUntil(check, what, timeoutMs);

/** Parts of epoch `epoch`, each a runtime of 50 sessions (some 3 KB), `count` of them, then their end. */
function run(epoch: number, count: number, end: (parts: number) => object): string[] {
  const frames = Array.from({ length: count }, (_, i) => {
    const sessions = Array.from({ length: 50 }, (_, j) => `proc-${j % 5}/session-${String(j).padStart(8, '0')}`);
    const runtimes: RuntimeState[] = [runtimeState(`r${i}`, 'peer', sessions)];
    return JSON.stringify({ type: 'part', term: 1, epoch, part: i, runtimes });
  });
  return [...frames, JSON.stringify(end(count))];
}

describe('a run of parts is bounded by runBytesMax', () => {
  const closers: Array<() => unknown> = [];
  after(async () => {
    for (const close of closers.reverse()) await close();
  });

  it("a follower closes a leader's run past runBytesMax with 1008, and keeps its epoch", async () => {
    const wss = new WebSocketServer({ port: 0, host: '127.0.0.1', perMessageDeflate: false });
    closers.push(() => new Promise((resolve) => wss.close(resolve)));
    await new Promise((resolve) => wss.once('listening', resolve));
    wss.on('headers', (headers) => headers.push(`${SYNC_FEATURES_HEADER}: ${Object.values(SYNC_FEATURES).join(', ')}`));
    const one = [runtimeState('a', 'leader', ['p1/t1'])];
    const snapshot = { epoch: 1, term: 1, runtimes: one };
    wss.on('connection', (ws) => {
      ws.send(JSON.stringify({ type: 'commit', term: 1, epoch: 1, body: { kind: 'snapshot', snapshot } }));
      for (const frame of run(2, 20, (parts) => ({ type: 'commit-end', term: 1, epoch: 2, parts }))) ws.send(frame);
    });
    const made = recordingFollower('f1', () => []);
    closers.push(() => made.follower.stop());
    const conn = await connectSync(`http://127.0.0.1:${(wss.address() as AddressInfo).port}`, 'f1', {
      runBytesMax: RUN_BYTES_MAX,
    });
    let closed: [number, string] | undefined;
    made.follower.attach(conn);
    conn.onClose((code, reason) => (closed = [code, reason]));
    await until(() => closed !== undefined || made.sink.last?.epoch === 2, 'the close, or epoch 2');
    assert.deepEqual(
      made.sink.applied.map((a) => a.epoch),
      [1],
      'the run was not applied',
    );
    assert.equal(closed?.[0], 1008);
    assert.match(closed[1], /run of parts: above runBytesMax \(16384 bytes\)/);
  });

  it("a leader closes a follower's run past runBytesMax with 1008", async () => {
    const leader = new EpochLeader({
      replicaId: 'leader',
      term: 1,
      clock: systemClock,
      localPart: () => [],
      merge: referenceMerge,
      diff: referenceDiff,
      apply: referenceApply,
      cycleIntervalMs: 50,
      cycleTimeoutMs: 200,
      debounceMs: 5,
    });
    const base = await serveLeader(leader, closers, { runBytesMax: RUN_BYTES_MAX });
    const ws = new WebSocket(`${base.replace('http', 'ws')}/api/sync/f2`, {
      perMessageDeflate: false,
      headers: { [SYNC_FEATURES_HEADER]: SYNC_FEATURES.parts },
    });
    closers.push(() => ws.terminate());
    await new Promise((resolve, reject) => ws.once('open', resolve).once('error', reject));
    const closed = new Promise<[number, string]>((resolve) => ws.once('close', (c, r) => resolve([c, String(r)])));
    const end = (parts: number) => ({ type: 'collect-end', term: 1, epoch: 1, replica: 'f2', version: 1, parts });
    for (const frame of run(1, 20, end)) ws.send(frame);
    const [code, reason] = await Promise.race([
      closed,
      until(() => (leader.latestStates()?.length ?? 0) > 0, "the follower's part committed").then(
        () => [0, 'taken'] as [number, string],
      ),
    ]);
    assert.equal(code, 1008, reason);
    assert.match(reason, /run of parts: above runBytesMax \(16384 bytes\)/);
  });
});
