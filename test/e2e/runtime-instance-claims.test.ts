// Two runtime processes started with one id (a `runtime join` command copied to two machines) that dial two
// different scheduler replicas: replicas publish with each runtime the instance id its process dialled with, so
// the second is refused 409 at the other replica once an epoch shows the first, and the first keeps its tunnel
// and its sessions. The first runtime itself, redialling the other replica when its own goes away, is admitted.
// Separate processes on loopback: two replicas, the first runtime on the follower, the second at the leader.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { startCluster, type TestCluster } from '../support/cluster.ts';
import { until, type AppProcess } from '../support/processes.ts';
import { connect, counter, whoami, type AnyClient } from './support.ts';

type Held = { owner: string; generation: number; available: boolean };

async function heldAt(url: string): Promise<Held | undefined> {
  const res = await fetch(`${url}/api/runtime/r0`, { signal: AbortSignal.timeout(2000) });
  if (res.status !== 200) return undefined;
  const { runtime } = (await res.json()) as { runtime: Held };
  return { owner: runtime.owner, generation: runtime.generation, available: runtime.available };
}

const refusedWith409 = (l: Record<string, unknown>): boolean =>
  String(l.msg).startsWith('scheduler refused the tunnel') && l.status === 409;

describe('two runtimes with one id dialling two replicas', () => {
  let cluster: TestCluster;
  let first: AppProcess;
  /** The first runtime's replica (a follower), and the other one (the leader). */
  let mine: AppProcess;
  let other: AppProcess;
  let client: AnyClient | undefined;
  before(async () => {
    cluster = await startCluster({ schedulers: 2, runtimes: 0, gateways: 1 });
    other = await cluster.leader();
    const at = cluster.schedulers.findIndex((s) => s !== other);
    mine = cluster.schedulers[at]!;
    // The other replica as its fallback, as `runtime join` takes several URLs.
    first = await cluster.startRuntime('r0', at, { args: ['--fallback-scheduler-urls', other.url!] });
    await cluster.waitForRuntimes(['r0']);
  });
  after(async () => {
    await client?.close().catch(() => {});
    await cluster?.stop();
  });

  it('refuses the second 409 at the other replica, and the first keeps its tunnel and sessions', async () => {
    client = await connect('v2', cluster.gatewayUrl());
    assert.equal((await whoami(client)).runtime, 'r0');
    assert.equal(await counter(client), 1);
    const held = await Promise.all(cluster.schedulerUrls().map(heldAt));
    assert.ok(
      held.every((h) => h?.owner === mine.name && h.available),
      `every replica shows r0 behind ${mine.name}: ${JSON.stringify(held)}`,
    );
    const second = await cluster.startRuntime('r0', 0, { schedulerUrl: other.url! });
    try {
      const refusal = await second.waitForLog(refusedWith409, 10_000);
      assert.equal(JSON.parse(String(refusal.body)).error, 'runtime id held by another live runtime');
      const warned = other.logs.find((l) => l.msg === 'runtime connect refused: id held by another live runtime');
      assert.equal(warned?.elsewhere, true, 'the replica says the id is held at another replica');
      assert.equal(await counter(client), 2, 'the session goes on in the first runtime');
      assert.deepEqual(await Promise.all(cluster.schedulerUrls().map(heldAt)), held, 'r0 keeps its tunnel');
      assert.ok(!second.logs.some((l) => l.msg === 'tunnel connected'), 'the second never held a tunnel');
    } finally {
      await second.stop();
    }
    assert.ok(!first.logs.some((l) => l.msg === 'tunnel disconnected'), 'the first kept its tunnel throughout');
  });

  it('admits the first runtime redialling the other replica when its own goes away', async () => {
    const counted = await counter(client!);
    // Killed: the leader goes on showing r0 live behind it until it finds the replica silent.
    mine.signal('SIGKILL');
    await mine.exited;
    await until(
      'r0 back behind the other replica',
      async () => {
        const h = await heldAt(other.url!);
        return h?.owner === other.name && h.available ? true : undefined;
      },
      15_000,
    );
    assert.ok(!first.logs.some(refusedWith409), 'never refused for its own id');
    assert.equal(await counter(client!), counted + 1, 'its session goes on');
  });
});
