// A runtime whose tunnel connection breaks redials at once (200-250 ms into
// its backoff), its sessions intact. A request for it meanwhile waits for it
// on the replica, up to REDIAL_WAIT_MS (longer over a slow link, or when the
// connection went silent), instead of being refused as for a runtime gone
// (which costs a client its session). The runtime reaches the
// replica through a TCP front here, so that the test can cut its connection
// as a load balancer or NAT in between would.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { once } from 'node:events';
import http2 from 'node:http2';
import net from 'node:net';
import type { RuntimeNode } from '@switchyard/runtime';
import { REDIAL_WAIT_MS, type SchedulerReplica } from '@switchyard/scheduler';
import { getJson, startReplicas, startRuntime, until } from './support.ts';

/**
 * A TCP front to `ports` (each connection to the next, round and round)
 * whose connections the test can reset or silence, and which can stop taking
 * new ones. With `delayMs`, every chunk is passed on that much later, each
 * way: a link with a round trip of twice that.
 */
async function cuttableFront(ports: number[], delayMs = 0) {
  const sockets = new Set<net.Socket>();
  const carried = new Set<{ silent: boolean }>();
  let next = 0;
  const server = net.createServer((client) => {
    const upstream = net.connect({ host: '127.0.0.1', port: ports[next++ % ports.length]! });
    for (const socket of [client, upstream]) {
      sockets.add(socket);
      socket.on('error', () => {});
      socket.on('close', () => sockets.delete(socket));
    }
    const link = { silent: false };
    // A silent link carries nothing, not even one end closing.
    client.on('close', () => !link.silent && upstream.destroy());
    upstream.on('close', () => !link.silent && client.destroy());
    carried.add(link);
    client.on('close', () => carried.delete(link));
    const pass = (from: net.Socket, to: net.Socket): void => {
      // Timers of one delay fire in the order they were set, so chunks keep their order.
      from.on('data', (chunk) => {
        if (link.silent) return;
        if (delayMs === 0) to.write(chunk);
        else setTimeout(() => !link.silent && to.write(chunk), delayMs);
      });
    };
    pass(client, upstream);
    pass(upstream, client);
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return {
    url: `http://127.0.0.1:${(server.address() as net.AddressInfo).port}`,
    cut: () => {
      for (const socket of sockets) socket.resetAndDestroy();
    },
    /**
     * Stops carrying the connections open now, both ways, without closing
     * them: a NAT or firewall in between forgot them. Neither end hears a
     * thing; each finds out by its own pings. New connections pass.
     */
    silence: () => {
      for (const link of carried) link.silent = true;
      carried.clear();
    },
    /** Takes no more connections: the runtime cannot come back. */
    close: () => server.close(),
  };
}

/** A counter of the replica at `url`, 0 before its first count. */
async function counter(url: string, series: string): Promise<number> {
  const text = await (await fetch(`${url}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith(`switchyard_scheduler_${series} `));
  return line ? Number(line.split(' ')[1]) : 0;
}

describe('a runtime whose tunnel connection breaks', () => {
  let replica: SchedulerReplica;
  before(async () => {
    [replica] = (await startReplicas(1)) as [SchedulerReplica];
  });
  after(() => replica?.close());

  /** Runs `use` with `r0` joined through a front, and both gone afterwards. */
  async function withRuntime(
    use: (front: Awaited<ReturnType<typeof cuttableFront>>, runtime: RuntimeNode) => Promise<void>,
    runtimePingMs = 300,
  ): Promise<void> {
    const front = await cuttableFront([Number(new URL(replica.url).port)]);
    const runtime = await startRuntime('r0', front.url, ['demo'], runtimePingMs);
    try {
      await until('r0 reachable', async () => (await fetch(`${replica.url}/api/proxy/r0/healthz`)).ok || undefined);
      await use(front, runtime);
    } finally {
      front.cut();
      await runtime.close();
      front.close();
      await until('r0 gone', async () => (await local()) === 0 || undefined);
    }
  }
  /** Tunnels this replica holds now. */
  const local = async (): Promise<number> => (await getJson(`${replica.url}/api/epoch`)).body.localRuntimes;
  const dropped = (): Promise<true> =>
    until('the replica to drop the tunnel', async () => (await local()) === 0 || undefined);

  /** A GET through the replica's proxy to r0's /healthz: its status, proxy error and time taken. */
  async function timedGet(): Promise<{ status: number; ms: number; error?: string }> {
    const started = performance.now();
    const res = await fetch(`${replica.url}/api/proxy/r0/healthz`);
    const body = await res.text();
    const error = res.status === 200 ? undefined : (JSON.parse(body) as { error?: string }).error;
    return { status: res.status, ms: performance.now() - started, ...(error ? { error } : {}) };
  }

  it('is waited for: a request meanwhile reaches it once it has redialled', async () => {
    await withRuntime(async (front) => {
      const back = await counter(replica.url, 'redial_waits_total{outcome="back"}');
      front.cut();
      await dropped();
      const reply = await timedGet();
      assert.equal(reply.status, 200, JSON.stringify(reply));
      assert.ok(reply.ms < REDIAL_WAIT_MS, `answered after ${reply.ms.toFixed(0)} ms`);
      assert.equal(await counter(replica.url, 'redial_waits_total{outcome="back"}'), back + 1);
    });
  });

  it('is waited for over HTTP/2 too (a gateway event stream)', async () => {
    await withRuntime(async (front) => {
      front.cut();
      await dropped();
      const session = http2.connect(replica.url);
      try {
        const stream = session.request({ ':path': '/api/proxy/r0/healthz' });
        const [headers] = (await once(stream, 'response')) as [http2.IncomingHttpHeaders];
        stream.resume();
        assert.equal(headers[':status'], 200);
      } finally {
        session.close();
      }
    });
  });

  it('is refused as gone once REDIAL_WAIT_MS has passed without it', async () => {
    await withRuntime(async (front) => {
      const gone = await counter(replica.url, 'redial_waits_total{outcome="gone"}');
      front.close();
      front.cut();
      await dropped();
      const reply = await timedGet();
      assert.equal(await counter(replica.url, 'redial_waits_total{outcome="gone"}'), gone + 1);
      assert.equal(reply.status, 502, JSON.stringify(reply));
      assert.equal(reply.error, 'runtime not connected');
      // It waited (a refusal at once takes a few ms), and no longer than the wait.
      assert.ok(reply.ms > REDIAL_WAIT_MS / 3 && reply.ms < REDIAL_WAIT_MS + 500, `refused after ${reply.ms} ms`);
    });
  });

  it('lets an HTTP/2 stream waiting for it be reset by its client with an error code', async () => {
    await withRuntime(async (front) => {
      front.close();
      front.cut();
      await dropped();
      // The replica runs in this process: what would end its own process is an uncaught exception here.
      const uncaught: unknown[] = [];
      const monitor = (error: unknown): void => void uncaught.push(error);
      process.on('uncaughtExceptionMonitor', monitor);
      const session = http2.connect(replica.url);
      session.on('error', () => {});
      try {
        const stream = session.request({ ':path': '/api/proxy/r0/healthz' });
        stream.on('error', () => {});
        await once(stream, 'ready');
        // Not CANCEL: the reset Node turns into an 'error' of the replica's stream.
        const closed = new Promise((resolve) => stream.once('close', resolve));
        stream.close(http2.constants.NGHTTP2_INTERNAL_ERROR);
        await closed;
        // Answered once the wait is over: the replica is still there, and the reset request went nowhere.
        const reply = await timedGet();
        assert.equal(reply.status, 502, JSON.stringify(reply));
        assert.equal(reply.error, 'runtime not connected');
        assert.deepEqual(uncaught, []);
      } finally {
        process.off('uncaughtExceptionMonitor', monitor);
        session.close();
      }
    });
  });

  it('is not waited for when it stopped (its GOAWAY): refused at once', async () => {
    await withRuntime(async (_front, runtime) => {
      await runtime.close();
      await dropped();
      const reply = await timedGet();
      assert.equal(reply.status, 502, JSON.stringify(reply));
      assert.equal(reply.error, 'runtime not connected');
      assert.ok(reply.ms < REDIAL_WAIT_MS / 3, `refused after ${reply.ms} ms`);
    });
  });

  // The runtime pings every RUNTIME_PING_MS, the replica every 300 ms: the replica finds a silent connection
  // dead first, and the runtime (its last ping here, plus its interval and timeout) up to 2 s later.
  const RUNTIME_PING_MS = 1000;

  it('is waited for when its connection went silent, until the runtime has found out too and redialled', async () => {
    await withRuntime(async (front) => {
      front.silence();
      await dropped();
      const reply = await timedGet();
      assert.equal(reply.status, 200, JSON.stringify(reply));
    }, RUNTIME_PING_MS);
  });

  it('is refused as gone once the runtime would have found out and redialled, if it does not come back', async () => {
    await withRuntime(async (front) => {
      front.close();
      front.silence();
      await dropped();
      const reply = await timedGet();
      assert.equal(reply.status, 502, JSON.stringify(reply));
      assert.equal(reply.error, 'runtime not connected');
      // Found dead here 0.3-0.6 s into the silence, the runtime's last ping up to 1 s before it: the runtime
      // knows 0.4-1.7 s after this replica, and the wait is REDIAL_WAIT_MS more. A wait of REDIAL_WAIT_MS
      // alone (a connection that broke) would be over within 0.6 s.
      const bound = 2 * RUNTIME_PING_MS + REDIAL_WAIT_MS;
      assert.ok(reply.ms > REDIAL_WAIT_MS + 200 && reply.ms < bound + 500, `refused after ${reply.ms} ms`);
    }, RUNTIME_PING_MS);
  });
});

describe('a runtime whose connection went silent and that redialled another replica', () => {
  // The replicas ping every 3 s, the runtime every 300 ms: it finds out and redials well before its first
  // replica does, which holds the silent tunnel meanwhile.
  const REPLICA_PING_MS = 3000;
  let replicas: SchedulerReplica[];
  before(async () => {
    replicas = await startReplicas(2, undefined, undefined, { tunnelPingIntervalMs: REPLICA_PING_MS });
  });
  after(() => Promise.all(replicas.map((r) => r.close())));

  it("is let go by the first replica as soon as an epoch shows it at the other: that one's requests are forwarded", async () => {
    const [first, second] = replicas as [SchedulerReplica, SchedulerReplica];
    const front = await cuttableFront([Number(new URL(first.url).port), Number(new URL(second.url).port)]);
    const runtime = await startRuntime('r0', front.url);
    try {
      const ownerSeenBy = async (replica: SchedulerReplica): Promise<string | undefined> =>
        (await getJson(`${replica.url}/api/runtimes`)).body.runtimes.find((r: { id: string }) => r.id === 'r0')?.owner;
      await until('r0 on the first replica', async () => (await ownerSeenBy(first)) === first.replicaId || undefined);
      const silentAt = performance.now();
      front.silence();
      await until(
        'the first replica to see r0 at the second',
        async () => (await ownerSeenBy(first)) === second.replicaId || undefined,
      );
      const started = performance.now();
      const res = await fetch(`${first.url}/api/proxy/r0/healthz`);
      await res.text();
      const ms = performance.now() - started;
      assert.equal(res.status, 200);
      assert.equal(res.headers.get('x-switchyard-forwarded'), '1', 'forwarded to the second replica');
      assert.ok(ms < 1000, `answered after ${ms.toFixed(0)} ms`);
      const local = (await getJson(`${first.url}/api/epoch`)).body.localRuntimes;
      assert.equal(local, 0, 'the first replica no longer holds the silent tunnel');
      assert.equal(await counter(first.url, 'tunnels_superseded_total'), 1);
      assert.ok(performance.now() - silentAt < REPLICA_PING_MS, 'all before the first replica found out itself');
    } finally {
      front.cut();
      await runtime.close();
      front.close();
    }
  });
});

describe('a runtime whose tunnel connection breaks over a slow link', () => {
  // A round trip of 1 s: the redial's upgrade request alone reaches the replica 0.5 s after it is sent,
  // 0.7-0.75 s after the break. Pings every 3 s, so that the link's round trip is no timeout.
  const ONE_WAY_MS = 500;
  const PING_MS = 3000;
  let replica: SchedulerReplica;
  before(async () => {
    [replica] = (await startReplicas(1, undefined, undefined, { tunnelPingIntervalMs: PING_MS })) as [SchedulerReplica];
  });
  after(() => replica?.close());

  it("is waited for as long as the redial's round trips take at the tunnel's ping round trip", async () => {
    const front = await cuttableFront([Number(new URL(replica.url).port)], ONE_WAY_MS);
    const runtime = await startRuntime('r0', front.url, ['demo'], PING_MS);
    try {
      await until('r0 reachable', async () => (await fetch(`${replica.url}/api/proxy/r0/healthz`)).ok || undefined);
      // The replica's first ping is answered one interval and a round trip after the tunnel opened.
      await new Promise((resolve) => setTimeout(resolve, PING_MS + 2 * ONE_WAY_MS + 500));
      front.cut();
      await until('the replica to drop the tunnel', async () => {
        const local = (await getJson(`${replica.url}/api/epoch`)).body.localRuntimes;
        return local === 0 || undefined;
      });
      const started = performance.now();
      const res = await fetch(`${replica.url}/api/proxy/r0/healthz`);
      const body = await res.text();
      assert.equal(res.status, 200, body);
      // Back after its backoff and the upgrade's one-way trip, then the request's round trip through the link.
      const ms = performance.now() - started;
      assert.ok(ms > REDIAL_WAIT_MS, `answered after ${ms.toFixed(0)} ms`);
    } finally {
      front.cut();
      await runtime.close();
      front.close();
    }
  });
});
