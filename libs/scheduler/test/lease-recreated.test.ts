import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { RuntimeNode } from '@switchyard/runtime';
import { MemoryLeaseStore } from '@switchyard/election';
import type { LeaseLock, LeaseRecord } from '@switchyard/election';
import type { SchedulerReplica } from '@switchyard/scheduler';
import { getJson, startReplicas, startRuntime, until } from './support.ts';

/**
 * The Lease as the API server keeps it: `delete()` removes the object, so the
 * next create starts a new one, and replicas told they are cut off fail every
 * call (a partition from the API server, e.g. while it is restored).
 */
class LeaseApi {
  #store = new MemoryLeaseStore();

  /** A released Lease that has seen `transitions` leaderships: the first leader here takes the next term. */
  constructor(transitions: number) {
    this.#store.create(lease(undefined, transitions, new Date(0)));
  }

  read(): LeaseRecord | undefined {
    return this.#store.read();
  }

  /** Deletes the Lease; `recreated` is then created at once, as by a replica that won the race to do it. */
  delete(recreated?: LeaseRecord): void {
    this.#store = new MemoryLeaseStore();
    if (recreated) this.#store.create(recreated);
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

function lease(holderIdentity: string | undefined, leaseTransitions: number, at: Date): LeaseRecord {
  return { holderIdentity, leaseTransitions, leaseDurationSeconds: 1, acquireTime: at, renewTime: at };
}

/** Waits until every replica's view is of one term above `fence`, and returns that term. */
async function oneTermAbove(replicas: readonly SchedulerReplica[], fence: number): Promise<number> {
  return until(
    `one term above ${fence} on every replica`,
    async () => {
      const terms = new Set(await Promise.all(replicas.map(async (r) => (await epochOf(r)).term)));
      const [term] = terms;
      return (terms.size === 1 && term! > fence && term) || undefined;
    },
    8000,
  );
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
    const api = new LeaseApi(4); // the first leader takes term 5
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

    const settled = await oneTermAbove(replicas, 5);
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

describe('a Lease deleted, then created by a replica that died before any follower reached it', () => {
  const replicas: SchedulerReplica[] = [];
  after(() => Promise.all(replicas.map((r) => r.close())));

  it('is not led again at a term the followers saw from another leader', async () => {
    const api = new LeaseApi(0); // the first leader takes term 1
    replicas.push(...(await startReplicas(3, undefined, undefined, { lock: api.lock(() => false) })));
    for (const replica of replicas) {
      await until(`term 1 on ${replica.replicaId}`, async () => (await epochOf(replica)).term === 1 || undefined);
    }
    const leader = (await until('a leader', () => replicas.find((r) => r.isLeader)))!;
    const followers = replicas.filter((r) => r !== leader);

    // The replica that created the Lease again, at term 0, is gone: nobody fenced it off and told it so. When
    // its lease expires a follower takes it at term 1, the term it saw from another leader, whose history it
    // and the other followers hold under that term.
    api.delete(lease('gone@http://127.0.0.1:1', 0, new Date()));
    await leader.close();
    const settled = await oneTermAbove(followers, 1);
    assert.equal(api.read()?.leaseTransitions, settled, 'every replica follows the term of the lease');
    assert.equal(followers.filter((r) => r.isLeader).length, 1, 'one leader');
  });
});
