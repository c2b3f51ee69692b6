import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { RuntimeNode } from '@switchyard/runtime';
import { MemoryLeaseStore } from '@switchyard/election';
import type { LeaseLock, LeaseRecord } from '@switchyard/election';
import type { SchedulerReplica } from '@switchyard/scheduler';
import { getJson, startReplicas, startRuntime, startWeightedRuntime, until } from './support.ts';

/**
 * The Lease as the API server keeps it: `delete()` removes the object, so the
 * next create starts a new one, and replicas told they are cut off fail every
 * call (a partition from the API server, e.g. while it is restored).
 */
class LeaseApi {
  #store = new MemoryLeaseStore();

  /**
   * A released Lease that has seen `transitions` leaderships: the first leader here takes the next term.
   * Without `transitions`, no Lease yet: the first leader creates it, at term 0.
   */
  constructor(transitions?: number) {
    if (transitions !== undefined) this.#store.create(lease(undefined, transitions, new Date(0)));
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

/** Polls the (term, epoch) of every replica in `replicas` (those added later too) until stopped; per replica, in order. */
function watchEpochs(replicas: readonly SchedulerReplica[]): { stop: () => Promise<Map<string, string[]>> } {
  const seen = new Map<string, string[]>();
  let stopped = false;
  const polling = (async () => {
    for (let round = 0; !stopped && round < 2000; round++) {
      for (const replica of replicas) {
        const { epoch, term } = await epochOf(replica).catch(() => ({ epoch: null, term: -1 }));
        if (epoch === null) continue;
        let pairs = seen.get(replica.replicaId);
        if (!pairs) seen.set(replica.replicaId, (pairs = []));
        pairs.push(`${term}:${epoch}`);
      }
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
  })();
  return {
    stop: async () => {
      stopped = true;
      await polling;
      return seen;
    },
  };
}

describe('a Lease deleted, then created again at the term the followers hold', () => {
  const replicas: SchedulerReplica[] = [];
  const runtimes: RuntimeNode[] = [];
  let watch: ReturnType<typeof watchEpochs> | undefined;
  after(async () => {
    await watch?.stop();
    await Promise.all(runtimes.map((r) => r.close()));
    await Promise.all(replicas.map((r) => r.close()));
  });

  it('is led again above that term, and no view goes back within a term', async () => {
    const api = new LeaseApi(); // a cluster on its first term: 0, as a restarted pod creates the Lease again
    let cutOff = false;
    replicas.push(...(await startReplicas(3, undefined, undefined, { lock: api.lock(() => cutOff) })));
    const leader = (await until('a leader', () => replicas.find((r) => r.isLeader)))!;
    assert.equal(api.read()?.leaseTransitions, 0);
    runtimes.push(await startRuntime('r0', replicas[0]!.url), await startRuntime('r1', replicas[1]!.url));
    for (const replica of replicas) {
      await until(
        `both runtimes on ${replica.replicaId}`,
        async () => (await runtimesOf(replica)).length === 2 || undefined,
      );
    }
    watch = watchEpochs(replicas);

    api.delete();
    cutOff = true;
    const [fresh] = await startReplicas(1, undefined, undefined, { lock: api.lock(() => false), replicaId: 'fresh' });
    replicas.push(fresh!);
    await until('the fresh replica leads', () => fresh!.isLeader || undefined);
    assert.equal(api.read()?.leaseTransitions, 0, 'the fresh replica leads at the term the others hold');
    await until('the old leader steps down, its renewals failing', () => !leader.isLeader || undefined);
    cutOff = false;

    const settled = await oneTermAbove(replicas, 0);
    assert.equal(api.read()?.leaseTransitions, settled, 'every replica follows the term of the lease');
    runtimes.push(await startRuntime('late', replicas[1]!.url));
    for (const replica of replicas) {
      await until(
        `the late runtime on ${replica.replicaId}`,
        async () => (await runtimesOf(replica)).includes('late') || undefined,
      );
    }
    for (const [replica, pairs] of await watch.stop()) {
      for (let i = 1; i < pairs.length; i++) {
        const [term0, epoch0] = pairs[i - 1]!.split(':').map(Number) as [number, number];
        const [term1, epoch1] = pairs[i]!.split(':').map(Number) as [number, number];
        assert.ok(term1 > term0 || (term1 === term0 && epoch1 >= epoch0), `${replica} went back: ${pairs.join(' ')}`);
      }
    }
  });
});

describe('a Lease deleted, then created by a replica that never read it, below the epochs the followers hold', () => {
  const replicas: SchedulerReplica[] = [];
  let runtime: RuntimeNode | undefined;
  let watch: ReturnType<typeof watchEpochs> | undefined;
  after(async () => {
    await watch?.stop();
    await runtime?.close();
    await Promise.all(replicas.map((r) => r.close()));
  });

  it('numbers its new term above every epoch the followers held, so no epoch number of a view goes back', async () => {
    const api = new LeaseApi(4); // the first leader takes term 5
    let cutOff = false;
    replicas.push(...(await startReplicas(3, undefined, undefined, { lock: api.lock(() => cutOff) })));
    const weighted = await startWeightedRuntime('r0', replicas[1]!.url);
    runtime = weighted.node;
    // Epochs well above the few a fresh leader commits on its own: each weight change is one more.
    const epochs = async (): Promise<number[]> =>
      Promise.all(replicas.map(async (r) => (await epochOf(r)).epoch ?? -1));
    for (let sandboxes = 1; sandboxes <= 10; sandboxes++) {
      const before = Math.min(...(await epochs()));
      await weighted.weigh(sandboxes);
      await until(
        `an epoch above ${before} everywhere`,
        async () => Math.min(...(await epochs())) > before || undefined,
      );
    }
    const held = Math.max(...(await epochs()));
    assert.ok(held >= 10, `the followers hold epoch ${held}`);
    watch = watchEpochs(replicas);

    api.delete();
    cutOff = true;
    const [fresh] = await startReplicas(1, undefined, undefined, { lock: api.lock(() => false), replicaId: 'fresh' });
    replicas.push(fresh!);
    await until('the fresh replica leads', () => fresh!.isLeader || undefined);
    const old = replicas.slice(0, 3);
    await until('the old leader steps down, its renewals failing', () => old.every((r) => !r.isLeader) || undefined);
    cutOff = false;

    const settled = await oneTermAbove(replicas, 5);
    assert.equal(api.read()?.leaseTransitions, settled, 'every replica follows the term of the lease');
    // The followers' refusal tells the fresh leader their epochs: its next term is numbered above them (a
    // term or two, should one follower hold an epoch more than another). Learning nothing from it, the fresh
    // leader would get there too, one refused term (two terms) per epoch of the gap.
    assert.ok(settled <= 5 + 3, `settled at term ${settled}: a term per epoch`);
    // The views are live again, and every one of them numbers the next change above what it held.
    await weighted.weigh(42);
    for (const replica of replicas) {
      await until(
        `the new weight on ${replica.replicaId}`,
        async () =>
          (await getJson(`${replica.url}/api/runtime/r0`)).body.runtime?.idleWeight?.sandboxes === 42 || undefined,
      );
      const { epoch, term } = await epochOf(replica);
      assert.ok(
        epoch !== null && epoch > held && term === settled,
        `${replica.replicaId} at ${term}:${epoch}, having held ${held}`,
      );
    }
    for (const [replica, pairs] of await watch.stop()) {
      const numbers = pairs.map((pair) => Number(pair.split(':')[1]));
      for (let i = 1; i < numbers.length; i++) {
        assert.ok(numbers[i]! >= numbers[i - 1]!, `${replica}'s epoch number went back: ${pairs.join(' ')}`);
      }
    }
  });
});
