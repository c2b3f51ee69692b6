// closeStalledWrites on a real listening port (plain and TLS), its sweeps on a manual clock:
// a stream whose reader takes nothing (a peer whose host vanished: its
// writes back up once the kernel's buffers are full) is closed at the bound;
// a reader that was paused and then takes a little every second is not, nor
// an idle connection. One large answer shows why progress is read off the
// kernel's take of a write in flight, not only off completed writes.
import assert from 'node:assert/strict';
import { once } from 'node:events';
import http from 'node:http';
import https from 'node:https';
import net from 'node:net';
import os from 'node:os';
import type { AddressInfo, Socket } from 'node:net';
import { after, before, describe, it } from 'node:test';
import tls from 'node:tls';
import { ManualClock } from '@switchyard/clock/testing';
import { closeStalledWrites, createMetrics } from '../src/index.ts';
import { connectionKey, parseRetransmitting, type UnackedState } from '../src/kernel-tcp.ts';
import { certificateFor127 } from '../src/testing.ts';

const STALL_TIMEOUT_MS = 10_000;
/** What the slow reader takes each second: a few times less than loopback's buffers hold. */
const READ_PER_SECOND_BYTES = 1024 * 1024;
const ANSWER_BYTES = 48 * 1024 * 1024;
const EVENT = Buffer.from(`data: ${'x'.repeat(1017)}\n\n`);

/** Waits in real time, polling, until `check` holds; fails after 5 s. */
async function until(check: () => boolean, what: string): Promise<void> {
  const deadline = performance.now() + 5000;
  while (!check()) {
    assert.ok(performance.now() < deadline, `timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

/** Lets the sockets' pending I/O (a window update, the kernel's room for more) reach both ends. */
const settle = (): Promise<void> => new Promise((resolve) => setTimeout(resolve, 20));

const certificate = certificateFor127();

for (const secure of [false, true]) {
  describe(
    `closeStalledWrites over ${secure ? 'TLS' : 'plain HTTP'}`,
    { skip: secure && 'missing' in certificate ? certificate.missing : false },
    () => {
      const clock = new ManualClock();
      const metrics = createMetrics('gateway');
      const warnings: Record<string, unknown>[] = [];
      const streams: Socket[] = [];
      let server: http.Server | https.Server;
      let port: number;
      const clients: net.Socket[] = [];
      const connect = (): net.Socket =>
        secure && !('missing' in certificate)
          ? tls.connect({ host: '127.0.0.1', port, ca: certificate.cert })
          : net.connect(port, '127.0.0.1');

      before(async () => {
        // An event stream that writes as fast as its reader takes it, waiting on backpressure.
        const handler: http.RequestListener = (req, res) => {
          if (req.url === '/answer') {
            // One large write, which the kernel takes a part at a time.
            streams.push(res.socket!);
            return void res.end(Buffer.alloc(ANSWER_BYTES, 'x'));
          }
          if (req.url !== '/stream') return void res.end('ok');
          streams.push(res.socket!);
          res.writeHead(200, { 'content-type': 'text/event-stream' });
          const pump = (): void => {
            while (!res.destroyed && res.write(EVENT));
            if (!res.destroyed) res.once('drain', pump);
          };
          pump();
        };
        server =
          secure && !('missing' in certificate)
            ? https.createServer({ key: certificate.key, cert: certificate.cert }, handler)
            : http.createServer(handler);
        closeStalledWrites(server, {
          stallTimeoutMs: STALL_TIMEOUT_MS,
          metrics,
          clock,
          logger: { warn: (fields) => void warnings.push(fields) },
        });
        server.listen(0, '127.0.0.1');
        await once(server, 'listening');
        port = (server.address() as AddressInfo).port;
      });
      after(async () => {
        for (const client of clients) client.destroy();
        server.closeAllConnections();
        await new Promise((resolve) => server.close(resolve));
        assert.equal(clock.pendingTimers, 0, 'the sweep stops with the server');
      });

      const stalledTotal = async (): Promise<number> =>
        (await metrics.registry.getSingleMetric('switchyard_gateway_connections_write_stalled_total')!.get()).values[0]
          ?.value ?? 0;

      /** Opens the event stream with a reader that takes nothing, and resolves once the server's writes wait. */
      const openBackedUp = async (path = '/stream'): Promise<{ client: net.Socket; served: Socket }> => {
        const client = connect();
        clients.push(client);
        client.on('error', () => {});
        client.pause();
        const count = streams.length;
        client.write(`GET ${path} HTTP/1.1\r\nHost: x\r\n\r\n`);
        await until(() => streams.length > count, 'the stream to be served');
        const served = streams[streams.length - 1]!;
        await until(() => served.writableLength > 0, "the server's writes to back up");
        return { client, served };
      };

      it('closes a connection whose reader takes nothing for the bound, counts it and warns', async () => {
        const before = await stalledTotal();
        const { client, served } = await openBackedUp();
        await clock.advance(STALL_TIMEOUT_MS - 2_500);
        assert.equal(served.destroyed, false, 'open before the bound');
        await clock.advance(2 * 2_500 + 1);
        assert.equal(served.destroyed, true, 'closed within a sweep past the bound');
        // What the kernels hold still reaches the reader, and then the end.
        client.resume();
        await until(() => client.readableEnded || client.destroyed, "the client's end to see it");
        assert.equal(await stalledTotal(), before + 1);
        assert.equal(warnings.length, 1);
        assert.equal(warnings[0]!['stallTimeoutMs'], STALL_TIMEOUT_MS);
      });

      for (const [what, path] of [
        ['an event stream', '/stream'],
        ['one large answer', '/answer'],
      ] as const) {
        it(`keeps a reader of ${what} that was paused, then takes a little every second`, async () => {
          const before = await stalledTotal();
          const { client, served } = await openBackedUp(path);
          // Paused for most of the bound: the writes wait all that time.
          await clock.advance(STALL_TIMEOUT_MS - 2_000);
          let taken = 0;
          for (let second = 0; second < (3 * STALL_TIMEOUT_MS) / 1000; second++) {
            const target = taken + READ_PER_SECOND_BYTES;
            await until(() => {
              for (let chunk: Buffer | null; taken < target && (chunk = client.read() as Buffer | null);)
                taken += chunk.length;
              return taken >= target;
            }, 'the reader to take its share');
            await settle();
            await clock.advance(1000);
            assert.equal(served.destroyed, false, `open after ${second + 1} s of slow reading (${taken} bytes taken)`);
          }
          assert.equal(await stalledTotal(), before);
          client.destroy();
        });
      }

      it('leaves an idle connection alone, however long', async () => {
        const client = connect();
        clients.push(client);
        client.write('GET / HTTP/1.1\r\nHost: x\r\n\r\n');
        await once(client, 'data');
        await clock.advance(3 * STALL_TIMEOUT_MS);
        assert.equal(client.destroyed, false);
        client.destroy();
      });
    },
  );
}

/** An HTTP server answering every request with an event stream that stays open, telling `onSocket` its socket. */
function keepAliveStreams(onSocket: (socket: Socket) => void): http.Server {
  return http.createServer((req, res) => {
    onSocket(res.socket!);
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    res.write(': keepalive\n\n');
  });
}

// A stream whose few bytes fit in the kernel's send buffer (keep-alive comments) never waits in the process:
// its vanished peer shows only in the kernel, as a connection it retransmits to. What the kernel says is
// given here, for the served end of a real connection.
describe('closeStalledWrites on connections the kernel retransmits to', () => {
  const clock = new ManualClock();
  const metrics = createMetrics('gateway');
  const warnings: Record<string, unknown>[] = [];
  const served: Socket[] = [];
  /** What the kernel says of each served connection, by its remote port; unlisted ones are acknowledged. */
  const kernel = new Map<number, UnackedState>();
  let server: http.Server;
  let port: number;

  before(async () => {
    server = keepAliveStreams((socket) => served.push(socket));
    closeStalledWrites(server, {
      stallTimeoutMs: STALL_TIMEOUT_MS,
      metrics,
      clock,
      logger: { warn: (fields) => void warnings.push(fields) },
      retransmitting: async () => {
        const found = new Map<string, UnackedState>();
        for (const s of served) {
          const state = s.destroyed ? undefined : kernel.get(s.remotePort!);
          if (state) found.set(connectionKey(s.localAddress!, s.localPort!, s.remoteAddress!, s.remotePort!), state);
        }
        return found;
      },
    });
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    port = (server.address() as AddressInfo).port;
  });
  after(async () => {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
    assert.equal(clock.pendingTimers, 0, 'the sweep stops with the server');
  });

  const openStream = async (): Promise<{ client: net.Socket; socket: Socket }> => {
    const client = net.connect(port, '127.0.0.1');
    client.on('error', () => {});
    client.write('GET /stream HTTP/1.1\r\nHost: x\r\n\r\n');
    await once(client, 'data');
    return { client, socket: served[served.length - 1]! };
  };
  /** Sweeps (2.5 s apart for a 10 s bound) with the kernel's answers read between them. */
  const sweeps = async (n: number): Promise<void> => {
    for (let i = 0; i < n; i++) {
      await clock.advance(2_500);
      await settle();
    }
  };

  it('closes one retransmitted to at every sweep for the bound, counts it and warns', async () => {
    const { client, socket } = await openStream();
    kernel.set(client.localPort!, { unackedBytes: 13, retransmits: 1 });
    await sweeps(3);
    kernel.set(client.localPort!, { unackedBytes: 13, retransmits: 5 });
    await sweeps(2);
    assert.equal(socket.destroyed, false, 'open before the bound');
    await sweeps(3);
    assert.equal(socket.destroyed, true, 'closed within a sweep or two past the bound');
    assert.equal(warnings.at(-1)!['why'], 'unacknowledged');
    client.destroy();
  });

  // The count falls back at an acknowledgement and climbs again at the next loss: sweeps seconds apart may see it
  // at 1 every time on a lossy link while every keep-alive before the last was acknowledged.
  for (const acknowledged of [true, false]) {
    it(`${acknowledged ? 'keeps' : 'closes'} one retransmitted to at every sweep whose peer ${acknowledged ? 'acknowledged' : 'took nothing'} in between`, async () => {
      const { client, socket } = await openStream();
      const keepAlive = ': keepalive\n\n';
      let unackedBytes = 0;
      for (let i = 0; i < 8; i++) {
        socket.write(keepAlive);
        unackedBytes = (acknowledged ? 0 : unackedBytes) + keepAlive.length;
        kernel.set(client.localPort!, { unackedBytes, retransmits: 1 });
        await sweeps(1);
      }
      assert.equal(socket.destroyed, !acknowledged);
      kernel.delete(client.localPort!);
      client.destroy();
    });
  }

  it('keeps one whose peer acknowledged in between (its retransmissions counted from 0 again)', async () => {
    const { client, socket } = await openStream();
    kernel.set(client.localPort!, { unackedBytes: 13, retransmits: 4 });
    await sweeps(3);
    kernel.set(client.localPort!, { unackedBytes: 13, retransmits: 1 });
    await sweeps(3);
    assert.equal(socket.destroyed, false);
    kernel.delete(client.localPort!);
    await sweeps(8);
    assert.equal(socket.destroyed, false, 'acknowledged: kept however long');
    client.destroy();
  });
});

/** A link-local IPv6 address of this host and its interface, which Node names a peer by with its zone (`%eth0`). */
function linkLocal(): { address: string; zone: string } | undefined {
  for (const [zone, addresses] of Object.entries(os.networkInterfaces())) {
    const found = addresses?.find((a) => a.family === 'IPv6' && a.address.toLowerCase().startsWith('fe80:'));
    if (found) return { address: found.address, zone };
  }
  return undefined;
}

// A peer on the same link may connect from its link-local address; the sweep reads the kernel's real answer.
describe(
  'closeStalledWrites on a link-local IPv6 connection',
  { skip: !linkLocal() && 'no link-local IPv6 address' },
  () => {
    const clock = new ManualClock();
    const served: Socket[] = [];
    let server: http.Server;
    let client: net.Socket;

    before(async () => {
      server = keepAliveStreams((socket) => served.push(socket));
      closeStalledWrites(server, {
        stallTimeoutMs: STALL_TIMEOUT_MS,
        metrics: createMetrics('gateway'),
        clock,
        logger: { warn: () => {} },
      });
      server.listen(0, '::');
      await once(server, 'listening');
    });
    after(async () => {
      client?.destroy();
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    });

    it('sweeps past it, and keeps it while its peer acknowledges', async () => {
      const { address, zone } = linkLocal()!;
      client = net.connect({ host: `${address}%${zone}`, port: (server.address() as AddressInfo).port });
      client.on('error', () => {});
      client.write('GET /stream HTTP/1.1\r\nHost: x\r\n\r\n');
      await once(client, 'data');
      assert.match(served[0]!.remoteAddress!, /%/, 'Node names the peer with its zone');
      for (let i = 0; i < 6; i++) {
        await clock.advance(2_500);
        await settle();
      }
      assert.equal(served[0]!.destroyed, false);
      assert.equal(clock.pendingTimers, 1, 'the sweep goes on');
    });
  },
);

// /proc/net/tcp lists every connection of the network namespace, other listeners' and other processes' too:
// two listeners on one port at two local addresses, each with a client from the same address and port (a NAT,
// a proxy in front), are told apart only by their local address.
describe('closeStalledWrites with listeners on one port at two local addresses', () => {
  const clock = new ManualClock();
  const servers: http.Server[] = [];
  const served = new Map<string, Socket>();
  const clients: net.Socket[] = [];
  const hex = (n: number): string => n.toString(16).toUpperCase().padStart(4, '0');
  /** What the kernel says: the connection to 127.0.0.2 is retransmitted to (its client vanished); the other is not. */
  let procText = '';

  before(async () => {
    for (const address of ['127.0.0.1', '127.0.0.2']) {
      const server = keepAliveStreams((socket) => served.set(address, socket));
      closeStalledWrites(server, {
        stallTimeoutMs: STALL_TIMEOUT_MS,
        metrics: createMetrics('gateway'),
        clock,
        logger: { warn: () => {} },
        retransmitting: async () => {
          const found = new Map<string, UnackedState>();
          parseRetransmitting(procText, found);
          return found;
        },
      });
      server.listen(servers[0] ? (servers[0].address() as AddressInfo).port : 0, address);
      await once(server, 'listening');
      servers.push(server);
    }
  });
  after(async () => {
    for (const client of clients) client.destroy();
    for (const server of servers) {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    }
  });

  it("closes the one retransmitted to, and keeps the other's live connection", async () => {
    const port = (servers[0]!.address() as AddressInfo).port;
    for (const host of ['127.0.0.1', '127.0.0.2']) {
      // libuv binds with SO_REUSEADDR: the second client takes the first one's port, towards another address.
      const client = net.connect({ host, port, localAddress: '127.0.0.3', localPort: clients[0]?.localPort });
      clients.push(client);
      client.on('error', () => {});
      client.write('GET /stream HTTP/1.1\r\nHost: x\r\n\r\n');
      await once(client, 'data');
    }
    assert.equal(clients[0]!.localPort, clients[1]!.localPort);
    const remotePort = hex(clients[1]!.localPort!);
    procText =
      '  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n' +
      `   0: 0200007F:${hex(port)} 0300007F:${remotePort} 01 0000000D:00000000 01:00000C8A 00000003     0        0 1 2 0000000000000000 20 4 30 10 -1\n`;
    for (let i = 0; i < 8; i++) {
      await clock.advance(2_500);
      await settle();
    }
    assert.equal(served.get('127.0.0.2')!.destroyed, true, 'the one retransmitted to');
    assert.equal(served.get('127.0.0.1')!.destroyed, false, 'the live one at the other address');
  });
});

// A read of /proc formats every socket of the network namespace: it is made every quarter of the bound, which
// tells a vanished peer within the bound as well, not at every sweep (every 5 s at most).
describe('closeStalledWrites reading what the kernel retransmits', () => {
  it('reads every quarter of the bound, not at every sweep', async () => {
    const clock = new ManualClock();
    let reads = 0;
    const server = keepAliveStreams(() => {});
    closeStalledWrites(server, {
      stallTimeoutMs: 60_000,
      metrics: createMetrics('gateway'),
      clock,
      logger: { warn: () => {} },
      retransmitting: async () => {
        reads++;
        return new Map();
      },
    });
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    const client = net.connect((server.address() as AddressInfo).port, '127.0.0.1');
    try {
      client.write('GET / HTTP/1.1\r\nHost: x\r\n\r\n');
      await once(client, 'data');
      for (let elapsed = 0; elapsed < 60_000; elapsed += 5_000) await clock.advance(5_000);
      assert.equal(reads, 4, 'one read each 15 s of a 60 s bound, its sweeps every 5 s');
    } finally {
      client.destroy();
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    }
  });
});
