// Runtimes outside the cluster come in through an Ingress that routes only the
// tunnel's connect path (charts/scheduler `ingress`), since the rest of the
// scheduler API has no authentication of its own. Here a stand-in for that
// rule sits in front of one replica: a TCP front that reads each
// connection's request line and passes the connection on only for
// `GET /api/runtime/connect`, answering anything else 404. Runtimes dial it
// on both tunnel transports; a gateway on the "cluster network" reaches the
// replica directly. Everything a runtime needs from its scheduler (joining,
// its state stream, the traffic of its sessions) must then ride the tunnel.
import assert from 'node:assert/strict';
import net from 'node:net';
import { after, before, describe, it } from 'node:test';
import { CONNECT_PATH } from '@switchyard/tunnel';
import { startCluster, type TestCluster } from '../support/cluster.ts';
import { until } from '../support/processes.ts';
import { counter, metric, sessionsAcross, type AnyClient } from './support.ts';

const REQUEST_LINE_BYTES_MAX = 8 * 1024;

interface PathFront {
  readonly url: string;
  /** Request lines passed on, and refused. */
  readonly passed: string[];
  readonly refused: string[];
  close(): Promise<void>;
}

/** A front passing on only connections whose first request is `GET <path>` (an Ingress rule of pathType Exact). */
async function startPathFront(upstream: URL, path: string): Promise<PathFront> {
  const passed: string[] = [];
  const refused: string[] = [];
  const sockets = new Set<net.Socket>();
  const server = net.createServer((client) => {
    sockets.add(client);
    client.on('close', () => sockets.delete(client));
    client.on('error', () => client.destroy());
    let head = Buffer.alloc(0);
    const onData = (chunk: Buffer): void => {
      head = Buffer.concat([head, chunk]);
      const end = head.indexOf('\r\n');
      if (end < 0 && head.length < REQUEST_LINE_BYTES_MAX) return;
      client.off('data', onData);
      const line = head.subarray(0, Math.max(end, 0)).toString('latin1');
      const [method, target] = line.split(' ');
      if (method !== 'GET' || target?.split('?', 1)[0] !== path) {
        refused.push(line);
        client.end('HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nconnection: close\r\n\r\n');
        return;
      }
      passed.push(line);
      const server = net.connect(Number(upstream.port), upstream.hostname);
      sockets.add(server);
      server.on('close', () => sockets.delete(server));
      server.on('error', () => client.destroy());
      client.on('close', () => server.destroy());
      server.on('close', () => client.destroy());
      server.write(head);
      client.pipe(server).pipe(client);
    };
    client.on('data', onData);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    passed,
    refused,
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
}

describe('runtimes through an ingress that routes only the connect path', () => {
  let cluster: TestCluster;
  let front: PathFront;
  const TRANSPORTS = { 'r-h2': 'http2', 'r-ws': 'websocket' } as const;
  before(async () => {
    cluster = await startCluster({ schedulers: 2, runtimes: 0, gateways: 1 });
    front = await startPathFront(new URL(cluster.schedulers[0]!.url!), CONNECT_PATH);
    for (const [id, transport] of Object.entries(TRANSPORTS)) {
      await cluster.startRuntime(id, 0, { schedulerUrl: front.url, args: ['--tunnel.transport', transport] });
    }
    await cluster.waitForRuntimes(Object.keys(TRANSPORTS), 20_000);
  });
  after(async () => {
    await cluster?.stop();
    await front?.close();
  });

  it('refuses the rest of the scheduler API', async () => {
    for (const [method, path] of [
      ['GET', '/api/runtimes'],
      ['POST', '/api/schedule'],
      ['POST', '/api/proxy/r-h2/mcp'],
      ['GET', '/ui'],
    ] as const) {
      const res = await fetch(`${front.url}${path}`, { method, ...(method === 'POST' ? { body: '{}' } : {}) });
      assert.equal(res.status, 404, `${method} ${path}`);
    }
    assert.equal(front.refused.length, 4);
  });

  it('holds both tunnels through it, on each transport', async () => {
    for (const runtime of cluster.runtimes) {
      const line = await runtime.waitForLog((l) => l.msg === 'tunnel connected', 5_000);
      assert.equal(line.url, `${front.url}${CONNECT_PATH}`, runtime.name);
      assert.equal(line.transport, TRANSPORTS[runtime.name as keyof typeof TRANSPORTS], runtime.name);
    }
  });

  it('serves sessions on both runtimes while runtimes ask for nothing but the connect path', async () => {
    const refusedBefore = front.refused.length;
    const clients: AnyClient[] = [];
    try {
      const placed = await sessionsAcross(cluster.gatewayUrl(0), clients);
      assert.deepEqual([...placed].sort(), Object.keys(TRANSPORTS).sort());
      for (const client of clients) for (let n = 1; n <= 3; n++) assert.equal(await counter(client), n);
      const scheduler = cluster.schedulers[0]!.url!;
      assert.ok((await metric(scheduler, 'switchyard_scheduler_relay_connections_total')) > 0, 'relays used');
      // Their state streams reach the scheduler through the tunnel: it counts their sessions.
      await until('both runtimes counted with sessions in the epoch', async () => {
        const seen = (await (await fetch(`${scheduler}/api/runtimes`)).json()) as {
          runtimes: { id: string; threads: number }[];
        };
        const counted = seen.runtimes.filter((r) => r.threads > 0).map((r) => r.id);
        return counted.length === 2 ? counted : undefined;
      });
    } finally {
      await Promise.all(clients.map((c) => c.close()));
    }
    assert.equal(front.refused.length, refusedBefore, `refused: ${front.refused.join(' | ')}`);
    assert.ok(front.passed.length >= 2, 'each runtime dialled through the front');
  });
});
