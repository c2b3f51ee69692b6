// A leader that loses its lease and takes it back before anyone else does
// leads a new term over the same followers: its first epoch must carry their
// runtimes, as the epoch before it did. Real replicas on loopback; the lease
// is a memory lock each replica can be cut off from.
import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { RuntimeNode } from '@switchyard/runtime';
import { MemoryLeaseStore, createMemoryLock } from '@switchyard/election';
import type { LeaseLock } from '@switchyard/election';
import type { SchedulerReplica } from '@switchyard/scheduler';
import { TOKEN, getJson, quietLogger, startReplicas, startRuntime, until } from './support.ts';

/** A lock on `store` whose every call fails while `cutOff()` holds (the API server out of reach). */
function cuttableLock(store: MemoryLeaseStore, cutOff: () => boolean): LeaseLock {
  return createMemoryLock(store, {
    intercept: () => {
      if (cutOff()) throw new Error('the API server is out of reach');
    },
  });
}

/** rb's join token: only b lists it, so b can hold its tunnel while it lists no token a takes from a peer. */
const RB_TOKEN = 'test-join-token-of-rb-only-0123456789';

const runtimesOf = async (replica: SchedulerReplica): Promise<string[]> =>
  ((await getJson(`${replica.url}/api/runtimes`)).body as { runtimes: { id: string }[] }).runtimes.map((r) => r.id);

describe('a leader that takes its lease back after losing it', () => {
  const replicas: SchedulerReplica[] = [];
  const runtimes: RuntimeNode[] = [];
  after(async () => {
    await Promise.all(runtimes.map((r) => r.close()));
    await Promise.all(replicas.map((r) => r.close()));
  });

  it("keeps its followers' runtimes in the first epoch of its new term", async () => {
    const store = new MemoryLeaseStore();
    const cut = { a: false, b: false };
    // b's join tokens are the ones it admits and presents to its leader alike: while it lists only rb's, it keeps
    // rb's tunnel but a refuses b's sync, whatever order b presents its tokens in.
    const bSyncing = [TOKEN, RB_TOKEN];
    let bTokens = bSyncing;
    const start = async (id: 'a' | 'b'): Promise<SchedulerReplica> => {
      const [replica] = await startReplicas(1, store, quietLogger, {
        replicaId: id,
        lock: cuttableLock(store, () => cut[id]),
        ...(id === 'b' ? { joinTokens: () => bTokens } : {}),
      });
      replicas.push(replica!);
      return replica!;
    };
    const b = await start('b');
    await until('b leads', () => b.isLeader || undefined);
    const a = await start('a');
    runtimes.push(await startRuntime('ra', a.url), await startRuntime('rb', b.url, ['demo'], 300, RB_TOKEN));
    for (const replica of [a, b]) {
      await until(`both runtimes on ${replica.replicaId}`, async () => {
        const ids = await runtimesOf(replica);
        return (ids.includes('ra') && ids.includes('rb')) || undefined;
      });
    }

    // b loses the lease to a and follows it: b is the leader a took over from.
    const termOfB = ((await getJson(`${b.url}/api/epoch`)).body as { term: number }).term;
    cut.b = true;
    await until('a takes over from b', () => (a.isLeader && !b.isLeader) || undefined, 8000);
    cut.b = false;
    await until('b follows a, its runtime in a new epoch of a', async () => {
      const [atA, atB] = await Promise.all([a, b].map(async (r) => (await getJson(`${r.url}/api/epoch`)).body));
      return (atA.term > termOfB && atB.term === atA.term && (await runtimesOf(a)).includes('rb')) || undefined;
    });

    // a loses the lease too, and takes it back: a new term, still over b, which cannot reach the lease meanwhile.
    // b stays away from the new term until its first epoch is checked, so that epoch can only hold b's runtime
    // from what a knew.
    bTokens = [RB_TOKEN];
    cut.b = true;
    cut.a = true;
    await until('a steps down', () => !a.isLeader || undefined);
    const before = (await getJson(`${a.url}/api/epoch`)).body as { epoch: number; term: number };
    cut.a = false;
    await until('a leads again', () => a.isLeader || undefined);
    assert.equal(b.isLeader, false, 'b never led meanwhile');
    const first = before.epoch + 1;
    const { status, body } = await until(`epoch ${first} on a`, async () => {
      const answer = await getJson(`${a.url}/api/epoch/${first}/snapshot`);
      return answer.status === 200 ? answer : undefined;
    });
    assert.equal(status, 200);
    const ids = (body as { runtimes: { runtime: { id: string } }[] }).runtimes.map((s) => s.runtime.id).sort();
    assert.deepEqual(ids, ['ra', 'rb'], `the first epoch of a's new term holds b's runtime`);
    const term = ((await getJson(`${a.url}/api/epoch`)).body as { term: number }).term;
    assert.ok(term > before.term, 'a leads a new term');
    const atB = (await getJson(`${b.url}/api/epoch`)).body as { term: number };
    assert.ok(atB.term < term, `b never synced with a's new term meanwhile (b at term ${atB.term})`);
    bTokens = bSyncing;
    cut.b = false;
    await until(`b on term ${term}`, async () => (await getJson(`${b.url}/api/epoch`)).body.term === term || undefined);
  });
});
