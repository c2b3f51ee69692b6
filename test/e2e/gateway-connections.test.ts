// The gateway binary holds at most connectionsMax client connections on its
// /mcp port: one more is closed unread, counted and warned of, and those it
// holds keep being served. A gateway process whose scheduler is never
// reached; raw sockets on loopback. Its metrics are on a port of their own,
// which a full /mcp port would not let a scrape through.
import assert from 'node:assert/strict';
import { once } from 'node:events';
import net from 'node:net';
import { after, before, describe, it } from 'node:test';
import { askHealthz } from './raw-connections.ts';
import { spawnApp, type AppProcess } from '../support/processes.ts';
import { metric } from './support.ts';

const CONNECTIONS_MAX = 3;

describe('the gateway binary with connectionsMax', () => {
  let gateway: AppProcess;
  let metricsBase: string;
  const held: net.Socket[] = [];

  before(async () => {
    gateway = await spawnApp('gateway', 'gw-connections', [
      ...['--host', '127.0.0.1', '--port', '0', '--schedulers', 'http://127.0.0.1:9'],
      ...['--metrics-port', '0', '--drain-delay-ms', '0', '--connections-max', String(CONNECTIONS_MAX)],
    ]);
    const ready = await gateway.waitForLog((l) => l.msg === 'ready');
    metricsBase = new URL(String(ready.metrics)).origin;
  });
  after(async () => {
    for (const socket of held) socket.destroy();
    await gateway.stop();
  });

  const open = (): net.Socket => {
    const socket = net.connect(gateway.port!, '127.0.0.1');
    socket.on('error', () => {});
    return socket;
  };

  it('closes a connection past the cap unread, counts it and warns, and serves those it holds', async () => {
    for (let i = 0; i < CONNECTIONS_MAX; i++) {
      const socket = open();
      held.push(socket);
      assert.match(await askHealthz(socket), /^HTTP\/1\.1 200/, `connection ${i + 1} of ${CONNECTIONS_MAX} not served`);
    }
    const refused = open();
    assert.equal(await askHealthz(refused), '', 'a connection past the cap was answered');
    if (!refused.destroyed) await once(refused, 'close');

    assert.equal(await metric(metricsBase, 'switchyard_gateway_connections_refused_total'), 1);
    assert.equal(await metric(metricsBase, 'switchyard_gateway_connections_open'), CONNECTIONS_MAX);
    assert.equal(await metric(metricsBase, 'switchyard_gateway_connections_max'), CONNECTIONS_MAX);
    const warning = await gateway.waitForLog((l) => String(l.msg).startsWith('connection refused'));
    assert.equal(warning.connectionsMax, CONNECTIONS_MAX);
    assert.equal(warning.level, 40, 'logged as a warning');

    // The chart's liveness probe goes to the metrics port: a full /mcp port must not get the gateway restarted.
    const health = await fetch(`${metricsBase}/healthz`, { signal: AbortSignal.timeout(5000) });
    assert.equal(health.status, 200, 'no /healthz beside /metrics while /mcp is full');
    await health.text();

    assert.match(await askHealthz(held[0]!), /^HTTP\/1\.1 200/, 'a held connection is no longer served');
    held.shift()!.destroy();
    // The gateway counts the connection gone once it sees it close; a new one is served then.
    for (let attempt = 0; ; attempt++) {
      const socket = open();
      if (/^HTTP\/1\.1 200/.test(await askHealthz(socket))) {
        held.push(socket);
        break;
      }
      assert.ok(attempt < 50, 'no room again after a held connection closed');
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  });
});
