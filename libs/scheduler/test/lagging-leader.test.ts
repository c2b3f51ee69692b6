// A replica that holds no epoch, or an old one, can win the lease when the
// leader goes away: its term's epochs must still be numbered above those its
// followers hold, or their views' epoch numbers go back. Real replicas on
// loopback; the lease is a memory lock.
import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { RuntimeNode } from '@switchyard/runtime';
import { MemoryLeaseStore, createMemoryLock } from '@switchyard/election';
import type { SchedulerReplica } from '@switchyard/scheduler';
import { TOKEN, getJson, quietLogger, startReplicas, startWeightedRuntime, until } from './support.ts';

const epochOf = async (replica: SchedulerReplica): Promise<{ epoch: number | null; term: number }> =>
  (await getJson(`${replica.url}/api/epoch`)).body;

describe('a replica that never synced takes over the lease', () => {
  const replicas: SchedulerReplica[] = [];
  let runtime: RuntimeNode | undefined;
  let stopWatching: (() => Promise<string[]>) | undefined;
  after(async () => {
    await stopWatching?.();
    await runtime?.close();
    await Promise.all(replicas.map((r) => r.close()));
  });

  it('numbers its term above the epoch its follower holds, whose view never goes back', async () => {
    const store = new MemoryLeaseStore();
    const [s0] = await startReplicas(1, store, quietLogger, { replicaId: 's0' });
    replicas.push(s0!);
    await until('s0 leads', () => s0!.isLeader || undefined);
    // s1 reads the lease but cannot write it while `s1Writes` is off: it stays a follower.
    let s1Writes = true;
    const lock = createMemoryLock(store, {
      intercept: ({ op }) => {
        if (op !== 'get' && !s1Writes) throw new Error('s1 cannot write the lease now');
      },
    });
    const [s1] = await startReplicas(1, store, quietLogger, { replicaId: 's1', lock });
    // s2 lists only a peer token the leader does not take, so it never syncs (a follower tries every token it
    // lists); it gets the cluster's once s0 is gone and no leader is left to sync with, to lead with.
    let s2Tokens: readonly string[] = ['not-a-token-of-this-cluster'];
    const [s2] = await startReplicas(1, store, quietLogger, { replicaId: 's2', joinTokens: () => s2Tokens });
    replicas.push(s1!, s2!);

    const weighted = await startWeightedRuntime('r0', s1!.url);
    runtime = weighted.node;
    const { weigh } = weighted;
    // Each weight change is one epoch: s1 ends well above anything s2 would number from its own view.
    for (let sandboxes = 1; sandboxes <= 10; sandboxes++) {
      const before = (await epochOf(s1!)).epoch ?? -1;
      await weigh(sandboxes);
      await until(
        `an epoch above ${before} on s1`,
        async () => ((await epochOf(s1!)).epoch ?? -1) > before || undefined,
      );
    }
    const { epoch: held, term: heldTerm } = (await epochOf(s1!)) as { epoch: number; term: number };
    assert.ok(held >= 10, `s1 holds epoch ${held}`);
    assert.equal((await epochOf(s2!)).epoch, null, 's2 never synced');

    const seen: string[] = [];
    let watching = true;
    const polling = (async () => {
      for (let round = 0; watching && round < 2000; round++) {
        const { epoch, term } = await epochOf(s1!).catch(() => ({ epoch: null, term: -1 }));
        if (epoch !== null) seen.push(`${term}:${epoch}`);
        await new Promise((resolve) => setTimeout(resolve, 10));
      }
    })();
    stopWatching = async () => {
      watching = false;
      await polling;
      return seen;
    };

    s1Writes = false;
    await s0!.close();
    s2Tokens = [TOKEN];
    await until('s2 leads', () => s2!.isLeader || undefined, 8000);
    await weigh(42);
    for (const replica of [s1!, s2!]) {
      await until(
        `the new weight on ${replica.replicaId}`,
        async () =>
          (await getJson(`${replica.url}/api/runtime/r0`)).body.runtime?.idleWeight?.sandboxes === 42 || undefined,
        8000,
      );
    }
    s1Writes = true;
    const [a, b] = [await epochOf(s1!), await epochOf(s2!)];
    assert.equal(a.term, b.term, 'one term on both');
    assert.ok(a.epoch! > held, `s1 at ${a.term}:${a.epoch}, having held ${held}`);
    // s2's first term is refused, and its refusal tells s2 the epoch s1 holds: the next term is numbered above
    // it (s2's first, the one the refusal names, s2's next; one to spare). A leader that learnt nothing from the
    // refusal would get there too, one refused term (two terms) per epoch of the gap.
    assert.ok(a.term <= heldTerm + 4, `s1 at ${a.term}:${a.epoch}, from term ${heldTerm}: a term per epoch`);
    const pairs = await stopWatching();
    const numbers = pairs.map((pair) => Number(pair.split(':')[1]));
    for (let i = 1; i < numbers.length; i++) {
      assert.ok(numbers[i]! >= numbers[i - 1]!, `s1's epoch number went back: ${pairs.join(' ')}`);
    }
  });
});
