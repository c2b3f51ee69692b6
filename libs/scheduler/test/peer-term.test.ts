// A peer admitted to epoch sync reports errors with a term: one above the
// leader's tells it the lease was created again below a term a follower saw,
// and the leader steps down and leads again above it. A Kubernetes Lease
// stores the term in leaseTransitions, an int32: a term past it, claimed by a
// broken or hostile peer, once made the leader step down and write a lease the
// API server refuses, leaving the cluster without a leader. A real replica on
// loopback and a raw WebSocket peer holding the cluster's token.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { MemoryLeaseStore } from '@switchyard/election';
import type { SchedulerReplica } from '@switchyard/scheduler';
import { startReplicas, syncPeer, until } from './support.ts';

/** The largest int32, the largest leaseTransitions a Kubernetes Lease stores. */
const LEASE_TERM_MAX = 2 ** 31 - 1;

describe('a peer claiming a term no Lease can store', () => {
  const store = new MemoryLeaseStore();
  let leader: SchedulerReplica;

  before(async () => {
    [leader] = (await startReplicas(1, store)) as [SchedulerReplica];
    await until('s0 leads', () => leader.isLeader || undefined);
  });
  after(() => leader.close());

  it('is refused like any invalid frame: the leader keeps leading, and the lease its term', async () => {
    const termBefore = store.read()!.leaseTransitions;
    const peer = await syncPeer(leader);
    peer.ws.send(JSON.stringify({ type: 'error', term: LEASE_TERM_MAX + 1, epoch: 0, reason: 'fenced off' }));
    await until('the peer closed, or the lease past its int32', () => {
      return peer.closed !== undefined || store.read()!.leaseTransitions > LEASE_TERM_MAX || undefined;
    });
    peer.ws.terminate();
    assert.ok(store.read()!.leaseTransitions <= LEASE_TERM_MAX, `lease term ${store.read()!.leaseTransitions}`);
    assert.equal(peer.closed?.code, 1008, `closed ${peer.closed?.code} (${peer.closed?.reason})`);
    assert.match(peer.closed.reason, /invalid sync message: term/);
    assert.equal(leader.isLeader, true);
    assert.equal(store.read()!.leaseTransitions, termBefore);
  });
});
