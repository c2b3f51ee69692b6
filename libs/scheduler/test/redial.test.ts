// A runtime whose tunnel connection breaks redials at once (250 ms into its
// backoff), its sessions intact. A request for it meanwhile waits for it on
// the replica, up to REDIAL_WAIT_MS, instead of being refused as for a
// runtime gone (which costs a client its session). The runtime reaches the
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

/** A TCP front to `port` whose connections the test can reset, and which can stop taking new ones. */
async function cuttableFront(port: number) {
  const sockets = new Set<net.Socket>();
  const server = net.createServer((client) => {
    const upstream = net.connect({ host: '127.0.0.1', port });
    for (const socket of [client, upstream]) {
      sockets.add(socket);
      socket.on('error', () => {});
      socket.on('close', () => sockets.delete(socket));
    }
    client.on('close', () => upstream.destroy());
    upstream.on('close', () => client.destroy());
    client.pipe(upstream).pipe(client);
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return {
    url: `http://127.0.0.1:${(server.address() as net.AddressInfo).port}`,
    cut: () => {
      for (const socket of sockets) socket.resetAndDestroy();
    },
    /** Takes no more connections: the runtime cannot come back. */
    close: () => server.close(),
  };
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
  ): Promise<void> {
    const front = await cuttableFront(Number(new URL(replica.url).port));
    const runtime = await startRuntime('r0', front.url);
    try {
      await until('r0 reachable', async () => (await fetch(`${replica.url}/api/proxy/r0/healthz`)).ok || undefined);
      await use(front, runtime);
    } finally {
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
      front.cut();
      await dropped();
      const reply = await timedGet();
      assert.equal(reply.status, 200, JSON.stringify(reply));
      assert.ok(reply.ms < REDIAL_WAIT_MS, `answered after ${reply.ms.toFixed(0)} ms`);
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
      front.close();
      front.cut();
      await dropped();
      const reply = await timedGet();
      assert.equal(reply.status, 502, JSON.stringify(reply));
      assert.equal(reply.error, 'runtime not connected');
      // It waited (a refusal at once takes a few ms), and no longer than the wait.
      assert.ok(reply.ms > REDIAL_WAIT_MS / 3 && reply.ms < REDIAL_WAIT_MS + 500, `refused after ${reply.ms} ms`);
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
});
