// What operations.md promises when a scheduler replica dies with runtime
// tunnels on it: the runtimes redial another replica, and their sessions
// survive if they are back before the ping timeout. In a cluster the
// runtimes dial the scheduler Service, not one replica; here a round-robin
// TCP front over the replicas stands in for the Service (a replica that
// refuses connections is skipped, as its endpoint would be). The other
// process-level suites join each runtime to one replica's own URL, where a
// dead replica loses its runtimes until it returns.
import assert from 'node:assert/strict';
import { once } from 'node:events';
import net from 'node:net';
import { after, before, describe, it } from 'node:test';
import { startCluster, type TestCluster } from '../support/cluster.ts';
import { until } from '../support/processes.ts';
import { connect, counter, whoami, type AnyClient } from './support.ts';

const SESSIONS = 8;

/** A Service stand-in: each connection goes to the next replica port that accepts it. */
async function serviceFront(ports: readonly number[]): Promise<{ url: string; close(): void }> {
  let next = 0;
  const server = net.createServer((client) => {
    client.on('error', () => {});
    const dial = (triesLeft: number): void => {
      const upstream = net.connect({ host: '127.0.0.1', port: ports[next++ % ports.length]! });
      upstream.once('connect', () => {
        upstream.on('error', () => client.destroy());
        upstream.on('close', () => client.destroy());
        client.on('close', () => upstream.destroy());
        client.pipe(upstream).pipe(client);
      });
      upstream.once('error', () => (triesLeft > 1 ? dial(triesLeft - 1) : client.destroy()));
    };
    dial(ports.length);
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return {
    url: `http://127.0.0.1:${(server.address() as net.AddressInfo).port}`,
    close: () => server.close(),
  };
}

type RuntimeRow = { id: string; available: boolean; owner: string };

async function runtimesSeenBy(url: string): Promise<RuntimeRow[]> {
  const res = await fetch(`${url}/api/runtimes`);
  return ((await res.json()) as { runtimes: RuntimeRow[] }).runtimes;
}

describe('a scheduler replica dies with tunnels on it (runtimes dial a Service)', () => {
  let cluster: TestCluster;
  let front: { url: string; close(): void };
  before(async () => {
    cluster = await startCluster({ runtimes: 0, tunnelPingIntervalMs: 1000 });
    front = await serviceFront(cluster.schedulers.map((s) => s.port!));
    await cluster.startRuntime('r0', 0, { schedulerUrl: front.url });
    await cluster.startRuntime('r1', 0, { schedulerUrl: front.url });
    await cluster.waitForRuntimes(['r0', 'r1'], 15_000);
  });
  after(async () => {
    front?.close();
    await cluster?.stop();
  });

  it('keeps the sessions of its runtimes: they redial another replica and count on', async () => {
    const clients: AnyClient[] = await Promise.all(
      Array.from({ length: SESSIONS }, () => connect('v2', cluster.gatewayUrl())),
    );
    try {
      const placed = await Promise.all(clients.map(async (c) => ({ runtime: (await whoami(c)).runtime })));
      for (const c of clients) assert.equal(await counter(c), 1);
      // The replica holding the tunnel of the first session's runtime goes.
      const moved = placed[0]!.runtime;
      const owner = (await runtimesSeenBy(cluster.schedulerUrls()[0]!)).find((r) => r.id === moved)!.owner;
      const victim = cluster.schedulers.find((s) => s.name === owner)!;
      assert.ok(victim, `replica ${owner} holds ${moved}`);
      victim.signal('SIGKILL');
      await victim.exited;
      const survivor = cluster.schedulers.find((s) => s !== victim)!;
      await until(
        `${moved} back on another replica`,
        async () => {
          const row = (await runtimesSeenBy(survivor.url!).catch(() => [])).find((r) => r.id === moved);
          return row?.available && row.owner !== owner ? true : undefined;
        },
        10_000,
      );
      const counts = await Promise.all(clients.map((c) => counter(c).catch((e: Error) => e.message)));
      assert.deepEqual(counts, Array<number>(SESSIONS).fill(2), `sessions on ${placed.map((p) => p.runtime)}`);
      assert.ok(placed.filter((p) => p.runtime === moved).length >= 1, 'at least one session was on the moved runtime');
    } finally {
      await Promise.all(clients.map((c) => c.close().catch(() => {})));
    }
  });
});
