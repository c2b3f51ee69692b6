// What operations.md promises when a scheduler replica dies (or freezes, or
// restarts) with runtime tunnels on it: the runtimes redial another replica,
// and their sessions survive if they are back before the ping timeout. In a cluster the
// runtimes dial the scheduler Service, not one replica; here a round-robin
// TCP front over the replicas stands in for the Service (a replica that
// refuses connections is skipped, as its endpoint would be). The other
// process-level suites join each runtime to one replica's own URL, where a
// dead replica loses its runtimes until it returns.
import assert from 'node:assert/strict';
import { once } from 'node:events';
import net from 'node:net';
import { after, before, describe, it, type TestContext } from 'node:test';
import { startCluster, type TestCluster } from '../support/cluster.ts';
import { until } from '../support/processes.ts';
import {
  LEGACY,
  connect,
  counter,
  initializeBody,
  metric,
  post,
  rpcResult,
  textOf,
  toolCallBody,
  whoami,
  type AnyClient,
} from './support.ts';
import type { AppProcess } from '../support/processes.ts';

const SESSIONS = 8;

interface ServiceFront {
  readonly url: string;
  /** Ports taken out of the rotation, as a replica failing its readiness probe leaves the Service's endpoints. */
  readonly out: Set<number>;
  /** Resets every connection through it, as a load balancer or NAT in between may. */
  cut(): void;
  /**
   * Stops carrying the connections open now, in both directions, without
   * closing them (a NAT or firewall in between that forgot them); new ones
   * pass as before.
   */
  silence(): void;
  close(): void;
}

/** A Service stand-in: each connection goes to the next replica port in the rotation that accepts it. */
async function serviceFront(ports: readonly number[]): Promise<ServiceFront> {
  let next = 0;
  const out = new Set<number>();
  const open = new Set<net.Socket>();
  const pairs = new Set<{ readonly client: net.Socket; readonly upstream: net.Socket; silent: boolean }>();
  const held = (socket: net.Socket): void => {
    open.add(socket);
    socket.on('close', () => open.delete(socket));
  };
  const server = net.createServer((client) => {
    client.on('error', () => {});
    held(client);
    const dial = (triesLeft: number): void => {
      const inRotation = ports.filter((p) => !out.has(p));
      const upstream = net.connect({ host: '127.0.0.1', port: inRotation[next++ % inRotation.length]! });
      held(upstream);
      upstream.once('connect', () => {
        const pair = { client, upstream, silent: false };
        pairs.add(pair);
        // A silent pair carries nothing, not even one end closing.
        upstream.on('error', () => !pair.silent && client.destroy());
        upstream.on('close', () => !pair.silent && client.destroy());
        client.on('close', () => !pair.silent && upstream.destroy());
        client.on('close', () => pairs.delete(pair));
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
    out,
    cut: () => {
      for (const socket of open) socket.resetAndDestroy();
    },
    silence: () => {
      for (const pair of pairs) {
        pair.silent = true;
        pair.client.unpipe(pair.upstream);
        pair.upstream.unpipe(pair.client);
        pair.client.pause();
        pair.upstream.pause();
      }
      pairs.clear();
    },
    close: () => server.close(),
  };
}

/** Three replicas, and two runtimes dialling them through a Service front; `gatewayArgs` for the gateway. */
async function runtimesBehindAServiceFront(
  gatewayArgs: readonly string[] = [],
): Promise<{ cluster: TestCluster; front: ServiceFront }> {
  const cluster = await startCluster({ runtimes: 0, tunnelPingIntervalMs: 1000, gatewayArgs });
  const front = await serviceFront(cluster.schedulers.map((s) => s.port!));
  await cluster.startRuntime('r0', 0, { schedulerUrl: front.url });
  await cluster.startRuntime('r1', 0, { schedulerUrl: front.url });
  await cluster.waitForRuntimes(['r0', 'r1'], 15_000);
  return { cluster, front };
}

/** `count` legacy sessions opened through the gateway at `url`, as the headers their requests carry (no GET stream). */
async function legacySessions(url: string, count = SESSIONS): Promise<Record<string, string>[]> {
  return Promise.all(
    Array.from({ length: count }, async () => {
      const init = await post(url, initializeBody(), { 'mcp-protocol-version': LEGACY });
      assert.equal(init.status, 200, init.text);
      return { 'mcp-protocol-version': LEGACY, 'mcp-session-id': init.headers.get('mcp-session-id')! };
    }),
  );
}

/** The cluster behind a Service front of the describe block it is called in: started before its tests, stopped after. */
function clusterBehindAServiceFront(): { readonly cluster: TestCluster; readonly front: ServiceFront } {
  const setup = {} as { cluster: TestCluster; front: ServiceFront };
  before(async () => Object.assign(setup, await runtimesBehindAServiceFront()));
  after(async () => {
    setup.front?.close();
    await setup.cluster?.stop();
  });
  return setup;
}

type RuntimeRow = { id: string; available: boolean; owner: string };

async function runtimesSeenBy(url: string): Promise<RuntimeRow[]> {
  const res = await fetch(`${url}/api/runtimes`);
  return ((await res.json()) as { runtimes: RuntimeRow[] }).runtimes;
}

describe('a scheduler replica dies with tunnels on it (runtimes dial a Service)', () => {
  const setup = clusterBehindAServiceFront();

  it('keeps the sessions of its runtimes: they redial another replica and count on', async () => {
    const clients: AnyClient[] = await Promise.all(
      Array.from({ length: SESSIONS }, () => connect('v2', setup.cluster.gatewayUrl())),
    );
    try {
      const placed = await Promise.all(clients.map(async (c) => ({ runtime: (await whoami(c)).runtime })));
      for (const c of clients) assert.equal(await counter(c), 1);
      // The replica holding the tunnel of the first session's runtime goes.
      const moved = placed[0]!.runtime;
      const owner = (await runtimesSeenBy(setup.cluster.schedulerUrls()[0]!)).find((r) => r.id === moved)!.owner;
      const victim = setup.cluster.schedulers.find((s) => s.name === owner)!;
      assert.ok(victim, `replica ${owner} holds ${moved}`);
      victim.signal('SIGKILL');
      await victim.exited;
      const survivor = setup.cluster.schedulers.find((s) => s !== victim)!;
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

// The gateway's checks of its upstreams find a silent replica (their default
// is every 5 s); at 2 s, twice the replicas' tunnel pings, a loaded machine
// still answers them in time.
const UPSTREAM_CHECK_MS = 2000;

describe('a scheduler replica goes silent with tunnels on it (frozen: it takes connections, answers nothing)', () => {
  let cluster: TestCluster;
  let front: ServiceFront;
  let victim: AppProcess | undefined;
  before(
    async () =>
      ({ cluster, front } = await runtimesBehindAServiceFront([
        '--upstream-check-interval-ms',
        String(UPSTREAM_CHECK_MS),
      ])),
  );
  after(async () => {
    victim?.signal('SIGCONT');
    front?.close();
    await cluster?.stop();
  });

  it('costs each of its sessions at most one failed call (502), then they count on through another replica', async () => {
    const clients: AnyClient[] = await Promise.all(
      Array.from({ length: SESSIONS }, () => connect('v2', cluster.gatewayUrl())),
    );
    try {
      const placed = await Promise.all(clients.map(async (c) => (await whoami(c)).runtime));
      for (const c of clients) assert.equal(await counter(c), 1);
      // A follower holding a runtime with sessions on it, so no election is part of what is measured.
      const leader = await cluster.leader();
      const rows = await runtimesSeenBy(cluster.schedulerUrls()[0]!);
      const moved = [...new Set(placed)].find((id) => rows.find((r) => r.id === id)?.owner !== leader.name);
      assert.ok(moved, `a session on a runtime held by a follower (${JSON.stringify(rows)}, leader ${leader.name})`);
      const owner = rows.find((r) => r.id === moved)!.owner;
      victim = cluster.schedulers.find((s) => s.name === owner)!;
      const frozenAt = performance.now();
      victim.signal('SIGSTOP');
      front.out.add(victim.port!);

      const failures: string[] = [];
      const counts = await Promise.all(
        clients.map(async (c) => {
          // Bounded: a call that fails is made again, at most four times in all.
          for (let attempt = 0; attempt < 4; attempt++) {
            try {
              return await counter(c);
            } catch (error) {
              failures.push((error as Error).message);
              await new Promise((resolve) => setTimeout(resolve, 500));
            }
          }
          return -1;
        }),
      );
      const tookMs = performance.now() - frozenAt;
      assert.deepEqual(counts, Array<number>(SESSIONS).fill(2), `failures: ${failures.join(' | ')}`);
      const onMoved = placed.filter((r) => r === moved).length;
      assert.ok(failures.length <= onMoved, `${failures.length} failed calls for ${onMoved} sessions on ${moved}`);
      for (const f of failures) assert.match(f, /stopped answering/);
      // Detection takes one to two checks; the idle timeout it replaces is 5 minutes.
      assert.ok(tookMs < 20_000, `all sessions counted on after ${(tookMs / 1000).toFixed(1)} s`);
      console.log(
        `silent owner: ${onMoved} of ${SESSIONS} sessions on ${moved}, ${failures.length} failed calls, ` +
          `all counting again after ${(tookMs / 1000).toFixed(1)} s`,
      );
    } finally {
      victim?.signal('SIGCONT');
      await Promise.all(clients.map((c) => c.close().catch(() => {})));
    }
  });
});

describe('a scheduler replica restarts with tunnels on it (runtimes dial a Service)', () => {
  const setup = clusterBehindAServiceFront();

  // A rolling restart. Sessions that only POST (no GET stream to reopen
  // meanwhile) keep the route the gateway cached: the restarted replica, back
  // at its address, no longer holds their runtime's tunnel, which redialled
  // another replica while it was out of the Service.
  it("keeps the sessions that were idle meanwhile: the replica, back, forwards their requests to their runtime's new owner, once", async () => {
    const url = setup.cluster.gatewayUrl();
    const sessions = await legacySessions(url);
    const call = async (session: Record<string, string>, name: string): Promise<string> => {
      const reply = await post(url, toolCallBody(2, name), session);
      assert.equal(reply.status, 200, reply.text);
      return textOf(rpcResult(reply));
    };
    const placed = await Promise.all(
      sessions.map(async (s) => (JSON.parse(await call(s, 'whoami')) as { runtime: string }).runtime),
    );
    for (const s of sessions) assert.equal(await call(s, 'counter'), '1');
    // A follower holding a runtime with sessions on it, so no election is part of what is measured.
    const leader = await setup.cluster.leader();
    const rows = await runtimesSeenBy(setup.cluster.schedulerUrls()[0]!);
    const onFollower = (id: string): boolean => rows.find((r) => r.id === id)?.owner !== leader.name;
    // Sessions are placed by a hash of their ids: all of them on the leader's runtime is rare (1 in 2^SESSIONS
    // or so), not impossible; more are opened until one is not.
    for (let extra = 0; !placed.some(onFollower) && extra < 4 * SESSIONS; extra++) {
      const [session] = await legacySessions(url, 1);
      sessions.push(session!);
      placed.push((JSON.parse(await call(session!, 'whoami')) as { runtime: string }).runtime);
      assert.equal(await call(session!, 'counter'), '1');
    }
    const moved = [...new Set(placed)].find(onFollower);
    assert.ok(moved, `a session on a runtime held by a follower (${JSON.stringify(rows)}, leader ${leader.name})`);
    const owner = rows.find((r) => r.id === moved)!.owner;
    const index = setup.cluster.schedulers.findIndex((s) => s.name === owner);
    // Out of the rotation while it restarts, as a pod failing its readiness probe leaves the Service.
    setup.front.out.add(setup.cluster.schedulers[index]!.port!);
    const restarted = await setup.cluster.restartScheduler(index);
    setup.front.out.delete(restarted.port!);
    await until(
      `${moved} on another replica, and the restarted replica in the cluster`,
      async () => {
        const seen = await runtimesSeenBy(restarted.url!).catch(() => []);
        const row = seen.find((r) => r.id === moved);
        return row?.available && row.owner !== owner && seen.length === 2 ? true : undefined;
      },
      15_000,
    );
    // An event stream first: it goes over HTTP/2, where the replica reaches only tunnels it holds,
    // so the gateway asks again over HTTP/1.1, where it forwards.
    const session = sessions[placed.indexOf(moved)]!;
    const listening = new AbortController();
    const stream = await fetch(url, {
      headers: { ...session, accept: 'text/event-stream' },
      signal: listening.signal,
    });
    listening.abort();
    assert.equal(stream.status, 200, `GET stream of a session on ${moved}`);
    assert.match(stream.headers.get('content-type') ?? '', /text\/event-stream/);
    const counts = await Promise.all(sessions.map((s) => call(s, 'counter').catch((e: Error) => e.message)));
    assert.deepEqual(
      counts,
      Array<string>(sessions.length).fill('2'),
      `sessions on ${placed.join(', ')}; ${moved} moved`,
    );
    // They went the way their cached route says, to the restarted replica, which forwarded them to the owner.
    const proxied = await metric(restarted.url!, 'switchyard_scheduler_proxy_requests_total');
    const onMoved = placed.filter((r) => r === moved).length;
    assert.ok(
      proxied >= onMoved,
      `${proxied} requests through the restarted replica for ${onMoved} sessions on ${moved}`,
    );
    // Each forwarded answer said so, and the gateway asked the scheduler where the runtime is now:
    // the extra hop lasted one request, not the session.
    const gateway = url.replace(/\/mcp$/, '');
    await until(
      `the routes of the sessions on ${moved} (${onMoved}) to follow it`,
      async () => ((await metric(gateway, 'switchyard_gateway_routes_followed_total')) >= onMoved ? true : undefined),
      5_000,
    );
    const next = await Promise.all(sessions.map((s) => call(s, 'counter').catch((e: Error) => e.message)));
    assert.deepEqual(next, Array<string>(sessions.length).fill('3'));
    assert.equal(
      await metric(restarted.url!, 'switchyard_scheduler_proxy_requests_total'),
      proxied,
      'no request went through the restarted replica once the routes followed',
    );
  });
});

/**
 * A runtime `id` (its own arguments `args`) dialling the replicas of
 * `cluster` at `behind` through a Service front of its own, and the only
 * runtime there; it is stopped, and gone from every replica, after test `t`.
 */
async function runtimeBehindFront(
  t: TestContext,
  cluster: TestCluster,
  id: string,
  behind: readonly number[],
  args: readonly string[] = [],
): Promise<{ runtime: AppProcess; front: ServiceFront }> {
  const front = await serviceFront(behind.map((i) => cluster.schedulers[i]!.port!));
  const runtime = await cluster.startRuntime(id, 1, { schedulerUrl: front.url, args }).catch((error: unknown) => {
    front.close();
    throw error;
  });
  t.after(async () => {
    front.cut();
    front.close();
    await runtime.stop(3000);
    await cluster.waitForRuntimes([], 15_000);
  });
  await cluster.waitForRuntimes([id], 15_000);
  return { runtime, front };
}

/**
 * SESSIONS legacy sessions through `url`, each counting on one call at a
 * time; `fault` strikes after the first session's fifth call, and they go on
 * until what it returns has resolved (the runtime redialled), then make two
 * more calls each (within 30 s in all). Returns what each saw: the counts,
 * and `<status> <body>` for each failed call (a 404 ends a session).
 */
async function countThroughFault(url: string, fault: () => Promise<unknown>): Promise<string[][]> {
  const sessions = await legacySessions(url);
  let struckAt = 0;
  let over: Promise<unknown> | undefined;
  let overAt = 0;
  const deadline = performance.now() + 30_000;
  const runs = await Promise.all(
    sessions.map(async (session, i) => {
      const seen: string[] = [];
      let callsAfter = 0;
      while (performance.now() < deadline && callsAfter < 2) {
        if (overAt > 0) callsAfter++;
        const reply = await post(url, toolCallBody(i + 2, 'counter'), session);
        seen.push(reply.status === 200 ? textOf(rpcResult(reply)) : `${reply.status} ${reply.text}`);
        if (reply.status === 404) break;
        if (struckAt === 0 && seen.length === 5 && i === 0) {
          struckAt = performance.now();
          over = fault().then(() => (overAt = performance.now()));
          over.catch(() => {});
        }
      }
      return seen;
    }),
  );
  assert.ok(struckAt > 0, 'the fault struck');
  await over;
  assert.ok(overAt > 0, 'the runtime redialled within 30 s');
  return runs;
}

/**
 * Each session lost at most its call in flight (a 502: it is not replayed),
 * and counted on, in order, and on after the runtime had redialled.
 */
function assertCountedOn(runs: readonly string[][]): void {
  for (const [i, seen] of runs.entries()) {
    const failed = seen.filter((s) => !/^\d+$/.test(s));
    assert.ok(failed.length <= 1 && failed.every((f) => f.startsWith('502')), `session ${i}: ${failed.join(' | ')}`);
    const counts = seen.filter((s) => /^\d+$/.test(s)).map(Number);
    assert.ok(counts.length > 5, `session ${i} counted on after the fault: ${seen.join(', ')}`);
    assert.match(seen.at(-1)!, /^\d+$/, `session ${i} counted on after the redial: ${seen.join(', ')}`);
    for (let k = 1; k < counts.length; k++)
      assert.ok(counts[k]! > counts[k - 1]!, `session ${i}: ${counts.join(', ')}`);
  }
}

/** Resolves once `runtime` has connected a second time: it redialled (bounded by `until`). */
function redialled(runtime: AppProcess): Promise<unknown> {
  return until(
    `${runtime.name} to redial`,
    () => runtime.logs.filter((l) => l.msg === 'tunnel connected').length >= 2,
    30_000,
  );
}

/** Asserts `id` is held by the last replica of `behind`: where the test meant it to redial. */
async function assertRedialledTo(cluster: TestCluster, id: string, behind: readonly number[]): Promise<void> {
  const owner = (await runtimesSeenBy(cluster.schedulerUrls()[0]!)).find((r) => r.id === id)?.owner;
  assert.equal(owner, cluster.schedulers[behind.at(-1)!]!.name, `${id} redialled where the test meant it to`);
}

// A NAT or firewall that forgets a connection drops its packets without a
// word: neither end sees it close, and each finds out by its own pings. Here
// the replicas ping every second and the runtime every 3 s, so its replica
// finds out first, up to 5 s before the runtime does.
const SLOW_RUNTIME_PING_MS = 3000;

// The cases share one cluster: each has a runtime of its own (its own id, so
// no replica's state or log line of one case is taken for another's), the only
// one in the cluster while it runs.
describe("a runtime's connection to its replica is lost (each case a runtime of its own, behind a Service front)", () => {
  let cluster: TestCluster;
  before(async () => (cluster = await startCluster({ runtimes: 0, tunnelPingIntervalMs: 1000 })));
  after(async () => cluster?.stop());

  // Behind one replica, the runtime redials the replica that held it; behind two in rotation, the other one.
  for (const [n, where, behind] of [
    [0, 'the replica that held it', [1]],
    [1, 'another replica', [1, 2]],
  ] as const) {
    it(`is reset (a load balancer or NAT in between), and it redials ${where}: it keeps its sessions, the replica that held it holds their requests until it is back, here or there`, async (t) => {
      const id = `r${n}`;
      const { runtime, front } = await runtimeBehindFront(t, cluster, id, behind);
      assertCountedOn(
        await countThroughFault(cluster.gatewayUrl(), () => {
          front.cut();
          return redialled(runtime);
        }),
      );
      await assertRedialledTo(cluster, id, behind);
    });
  }

  for (const [n, where, behind] of [
    [2, 'the replica that held it', [1]],
    [3, 'another replica', [1, 2]],
  ] as const) {
    it(`goes silent (a NAT in between forgets it), and it redials ${where}: it keeps its sessions, the replica that found out first holds their requests until the runtime has too`, async (t) => {
      const id = `r${n}`;
      const args = ['--tunnel.ping-interval-ms', String(SLOW_RUNTIME_PING_MS)];
      const { runtime, front } = await runtimeBehindFront(t, cluster, id, behind, args);
      // On until the runtime has found out and redialled.
      assertCountedOn(
        await countThroughFault(cluster.gatewayUrl(), () => {
          front.silence();
          return redialled(runtime);
        }),
      );
      const replicaLogs = cluster.schedulers[1]!.logs.filter((l) => l.runtime === id);
      const replicaFirst = replicaLogs.find(
        (l) => l.msg === 'tunnel closed' && /no ping answer/.test(String(l.reason)),
      );
      const runtimeLater = runtime.logs.find(
        (l) => l.msg === 'tunnel disconnected' && /no ping answer/.test(String(l.reason)),
      );
      assert.ok(replicaFirst && runtimeLater, 'both ends found the silence by their pings');
      assert.ok(Number(replicaFirst.time) < Number(runtimeLater.time), 'the replica found out first');
      // Its wait ran until the runtime's pings (every 3 s, 3 s timeout) must have found out too: 1.6 s at least.
      const held = replicaLogs.find((l) => l.msg === 'holding requests for a lost runtime until it redials');
      assert.ok(Number(held?.waitMs) > 1000, `held requests for ${String(held?.waitMs)} ms`);
      await assertRedialledTo(cluster, id, behind);
    });
  }
});
