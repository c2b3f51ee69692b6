import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { RuntimeNode } from '@switchyard/runtime';
import { MemoryLeaseStore } from '@switchyard/election';
import type { LeaseLock, LeaseRecord } from '@switchyard/election';
import type { SchedulerReplica } from '@switchyard/scheduler';
import { getJson, startReplicas, startRuntime, until } from './support.ts';

/** Terms the Lease has been through before this cluster starts: its first leader takes term 5. */
const PAST_TRANSITIONS = 4;

/**
 * The Lease as the API server keeps it: `delete()` removes the object, so the
 * next create starts a new one, and replicas told they are cut off fail every
 * call (a partition from the API server, e.g. while it is restored).
 */
class LeaseApi {
  #store = new MemoryLeaseStore();

  constructor() {
    const at = new Date(0);
    const released = { holderIdentity: undefined, leaseDurationSeconds: 1, acquireTime: at, renewTime: at };
    this.#store.create({ ...released, leaseTransitions: PAST_TRANSITIONS });
  }

  read(): LeaseRecord | undefined {
    return this.#store.read();
  }

  delete(): void {
    this.#store = new MemoryLeaseStore();
  }

  lock(cutOff: () => boolean): LeaseLock {
    const reach = (): MemoryLeaseStore => {
      if (cutOff()) throw new Error('the API server is out of reach');
      return this.#store;
    };
    return {
      get: async () => reach().read(),
      create: async (record) => reach().create(record),
      update: async (record) => reach().update(record),
      describe: () => 'deletable',
    };
  }
}

const epochOf = async (replica: SchedulerReplica): Promise<{ epoch: number | null; term: number }> =>
  (await getJson(`${replica.url}/api/epoch`)).body;

const runtimesOf = async (replica: SchedulerReplica): Promise<string[]> =>
  ((await getJson(`${replica.url}/api/runtimes`)).body as { runtimes: { id: string }[] }).runtimes.map((r) => r.id);

describe('a Lease deleted, then created by a replica that never read it', () => {
  const replicas: SchedulerReplica[] = [];
  let runtime: RuntimeNode | undefined;
  after(async () => {
    await runtime?.close();
    await Promise.all(replicas.map((r) => r.close()));
  });

  it('is led again above the term the followers saw, and their views follow it again', async () => {
    const api = new LeaseApi();
    let cutOff = false;
    replicas.push(...(await startReplicas(3, undefined, undefined, { lock: api.lock(() => cutOff) })));
    for (const replica of replicas) {
      await until(`term 5 on ${replica.replicaId}`, async () => (await epochOf(replica)).term === 5 || undefined);
    }

    // The Lease is deleted while the running replicas cannot reach the API server; a replica started meanwhile
    // (a restarted pod) has never read it and creates it at term 0, below the followers' fence.
    api.delete();
    cutOff = true;
    const [fresh] = await startReplicas(1, undefined, undefined, { lock: api.lock(() => false), replicaId: 'fresh' });
    replicas.push(fresh!);
    await until('the fresh replica leads', () => fresh!.isLeader || undefined);
    assert.equal(api.read()?.leaseTransitions, 0, 'the fresh replica leads at term 0');
    const old = replicas.slice(0, 3);
    await until('the old leader steps down, its renewals failing', () => old.every((r) => !r.isLeader) || undefined);
    cutOff = false;

    const settled = await until(
      'one term above 5 on every replica',
      async () => {
        const terms = new Set(await Promise.all(replicas.map(async (r) => (await epochOf(r)).term)));
        const [term] = terms;
        return (terms.size === 1 && term! > 5 && term) || undefined;
      },
      8000,
    );
    assert.equal(api.read()?.leaseTransitions, settled, 'every replica follows the term of the lease');
    assert.equal(replicas.filter((r) => r.isLeader).length, 1, 'one leader');

    // The views are live again: a runtime that joins now shows on every replica.
    runtime = await startRuntime('late', replicas[1]!.url);
    for (const replica of replicas) {
      await until(
        `the late runtime on ${replica.replicaId}`,
        async () => (await runtimesOf(replica)).includes('late') || undefined,
      );
    }
  });
});
