// A peer admitted to epoch sync reports errors with its latest epoch, and a
// leader's next term numbers its epochs above it so that no view's epoch goes
// back. A broken or hostile peer claiming an epoch near 2^53 once made the
// leader's next term number its epochs where a double can no longer count:
// 2^53 + 1 is 2^53, so epochs stopped rising, and every follower refused the
// commits (not a safe integer) and reconnected for ever. A real replica on
// loopback and a raw WebSocket peer holding the cluster's token.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { MemoryLeaseStore } from '@switchyard/election';
import type { SchedulerReplica } from '@switchyard/scheduler';
import { getJson, startReplicas, syncPeer, until } from './support.ts';

describe('a peer claiming a latest epoch too high for epoch numbers to rise above', () => {
  const store = new MemoryLeaseStore();
  let leader: SchedulerReplica;

  before(async () => {
    [leader] = (await startReplicas(1, store)) as [SchedulerReplica];
    await until(
      's0 leads with an epoch',
      async () => (await getJson(`${leader.url}/api/epoch`)).body.epoch ?? undefined,
    );
  });
  after(() => leader.close());

  it('is refused like any invalid frame: the leader keeps its term, and its epoch numbers room to rise', async () => {
    const termBefore = store.read()!.leaseTransitions;
    const peer = await syncPeer(leader);
    // A term above the leader's makes it lead again above it, numbering on from the latest epoch it was told.
    const error = { type: 'error', term: termBefore + 1, epoch: 0, reason: 'fenced off' };
    peer.ws.send(JSON.stringify({ ...error, latestEpoch: Number.MAX_SAFE_INTEGER }));
    const epochNow = async (): Promise<number> => (await getJson(`${leader.url}/api/epoch`)).body.epoch as number;
    // Refused, or taken: then the leader steps down (closing the peer, 1001) and leads again numbering past it.
    await until('the peer refused, or the leader numbering past 2^52', async () => {
      return peer.closed?.code === 1008 || (await epochNow()) > 2 ** 52 || undefined;
    });
    peer.ws.terminate();
    assert.ok((await epochNow()) < 2 ** 52, `the leader's epoch is ${await epochNow()}`);
    assert.equal(peer.closed?.code, 1008, `closed ${peer.closed?.code} (${peer.closed?.reason})`);
    assert.match(peer.closed.reason, /invalid sync message: latestEpoch/);
    assert.equal(leader.isLeader, true);
    assert.equal(store.read()!.leaseTransitions, termBefore);
  });
});
