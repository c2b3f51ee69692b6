import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { SchedulerReplica } from '@switchyard/scheduler';
import { getJson, startReplicas, until } from './support.ts';

async function lagSeconds(replica: SchedulerReplica): Promise<number> {
  const text = await (await fetch(`${replica.url}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith('switchyard_scheduler_epoch_lag_seconds '));
  assert.ok(line, 'the lag gauge is exported');
  return Number(line.split(' ')[1]);
}

describe('epoch lag metric', () => {
  let replicas: SchedulerReplica[] = [];
  after(async () => {
    await Promise.all(replicas.map((r) => r.close()));
  });

  it('stays within a few cycles on a cluster that is in sync but has nothing to change (no new epoch)', async () => {
    replicas = await startReplicas(2); // a cycle every 200 ms
    for (const replica of replicas) {
      await until(`an epoch on ${replica.replicaId}`, async () => {
        const { body } = await getJson(`${replica.url}/api/epoch`);
        return body.epoch !== null || undefined;
      });
    }
    await until('a leader', () => replicas.some((r) => r.isLeader) || undefined);
    await new Promise((resolve) => setTimeout(resolve, 1500));
    const epochs = await Promise.all(replicas.map(async (r) => (await getJson(`${r.url}/api/epoch`)).body.epoch));
    assert.equal(new Set(epochs).size, 1, 'every replica holds the latest epoch');
    for (const replica of replicas) {
      const lag = await lagSeconds(replica);
      assert.ok(
        lag < 0.75,
        `${replica.replicaId} (${replica.isLeader ? 'leader' : 'follower'}) reports ${lag} s of lag`,
      );
    }
  });
});
