// A replica that has no epoch yet: its lease is held by a leader that never
// answers, so no commit ever reaches it. Every read of the API must say
// "none" the same way, not hand out the view's internal "no epoch" number.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { MemoryLeaseStore, formatHolder } from '@switchyard/election';
import type { SchedulerReplica } from '@switchyard/scheduler';
import { getJson, startReplicas, until } from './support.ts';

describe('a replica whose leader never answers', () => {
  let replica: SchedulerReplica;

  before(async () => {
    const store = new MemoryLeaseStore();
    // Port 1 on loopback: nothing listens, so the follower never gets a commit.
    const ghost = formatHolder({ id: 'ghost', address: 'http://127.0.0.1:1' });
    const now = new Date();
    store.create({
      holderIdentity: ghost,
      leaseDurationSeconds: 3600,
      acquireTime: now,
      renewTime: now,
      leaseTransitions: 1,
    });
    replica = (await startReplicas(1, store))[0]!;
  });
  after(() => replica?.close());

  it('reports no epoch as null on /api/epoch and /api/runtimes alike', async () => {
    const epoch = await until('the replica to see the ghost leader', async () => {
      const answer = await getJson(`${replica.url}/api/epoch`);
      return answer.body.leader?.id === 'ghost' ? answer : undefined;
    });
    assert.equal(epoch.body.epoch, null);
    const runtimes = await getJson(`${replica.url}/api/runtimes`);
    assert.equal(runtimes.status, 200);
    // With /api/epoch's fields, read with the table (the same here: nothing changes without an epoch).
    assert.deepEqual(runtimes.body, { ...epoch.body, epoch: null, runtimes: [] });
  });
});
