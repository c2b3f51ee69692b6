// capConnections on a real listening port: connections past the cap are
// closed unread, counted, and warned of at most once per interval; those
// already open keep being served.
import assert from 'node:assert/strict';
import { once } from 'node:events';
import http from 'node:http';
import net from 'node:net';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { ManualClock } from '@switchyard/clock/testing';
import { CONNECTIONS_REFUSED_LOG_INTERVAL_MS, capConnections, createMetrics } from '../src/index.ts';

const CAP = 2;

describe('capConnections', () => {
  const clock = new ManualClock();
  const metrics = createMetrics('gateway');
  const warnings: Record<string, unknown>[] = [];
  let requests = 0;
  let server: http.Server;
  let port: number;
  const held: net.Socket[] = [];

  before(async () => {
    server = http.createServer((_req, res) => {
      requests++;
      res.end('ok');
    });
    capConnections(server, {
      connectionsMax: CAP,
      metrics,
      clock,
      logger: { warn: (fields) => void warnings.push(fields) },
    });
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    port = (server.address() as AddressInfo).port;
  });
  after(async () => {
    for (const socket of held) socket.destroy();
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  });

  const refusedTotal = async (): Promise<number> =>
    (await metrics.registry.getSingleMetric('switchyard_gateway_connections_refused_total')!.get()).values[0]?.value ??
    0;

  const gauge = async (name: string): Promise<number | undefined> =>
    (await metrics.registry.getSingleMetric(`switchyard_gateway_${name}`)?.get())?.values[0]?.value;

  /** Opens a connection and resolves once the server has taken it (it answers a request on it). */
  const openServed = async (): Promise<net.Socket> => {
    const socket = net.connect(port, '127.0.0.1');
    held.push(socket);
    socket.write('GET / HTTP/1.1\r\nHost: x\r\n\r\n');
    const [reply] = (await once(socket, 'data')) as [Buffer];
    assert.match(reply.toString(), /^HTTP\/1\.1 200/);
    return socket;
  };

  /** Opens a connection past the cap: it must be closed without an answer, its request never served. */
  const openRefused = async (): Promise<void> => {
    const before = requests;
    const socket = net.connect(port, '127.0.0.1');
    socket.on('error', () => {});
    socket.write('GET / HTTP/1.1\r\nHost: x\r\n\r\n');
    let answered = '';
    socket.on('data', (chunk: Buffer) => (answered += chunk.toString()));
    await once(socket, 'close');
    assert.equal(answered, '', 'a refused connection was answered');
    assert.equal(requests, before, 'a refused connection was served');
  };

  it('reads the connections it holds and its cap as gauges, so an alert can fire before the first refusal', async () => {
    assert.equal(await gauge('connections_open'), 0);
    await openServed();
    assert.equal(await gauge('connections_open'), 1);
    assert.equal(await gauge('connections_max'), CAP);
  });

  it('closes connections past the cap unread, counts each, and warns once per interval', async () => {
    while (held.length < CAP) await openServed();
    assert.equal(await gauge('connections_open'), CAP);
    await openRefused();
    await openRefused();
    assert.equal(await refusedTotal(), 2);
    assert.equal(warnings.length, 1, 'a second refusal within the interval was logged');
    assert.equal(warnings[0]!.connectionsMax, CAP);
    assert.equal(warnings[0]!.remote, '127.0.0.1');

    await clock.advance(CONNECTIONS_REFUSED_LOG_INTERVAL_MS);
    await openRefused();
    assert.equal(warnings.length, 2);
    assert.equal(warnings[1]!.unlogged, 1, 'the next warning says how many it held back');
  });

  it('serves the connections it holds, and takes a new one once one of them closes', async () => {
    const first = held[0]!;
    first.write('GET / HTTP/1.1\r\nHost: x\r\n\r\n');
    const [reply] = (await once(first, 'data')) as [Buffer];
    assert.match(reply.toString(), /^HTTP\/1\.1 200/);
    first.destroy();
    // The server counts the connection gone at its 'close', a moment after ours.
    const deadline = performance.now() + 5000;
    while ((await new Promise<number>((resolve) => server.getConnections((_e, n) => resolve(n)))) >= CAP) {
      assert.ok(performance.now() < deadline, 'the server still counts the closed connection');
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
    await openServed();
  });
});
