// The runtime binary's direct listener (the one gateways in direct mode dial,
// on the pod IP) holds at most directListen.connectionsMax connections: one
// more is closed unread, counted and warned of, and those it holds keep being
// served. A runtime process whose scheduler is never reached; raw sockets on
// loopback. Its metrics are on its health listener, which a full direct
// listener does not fill.
import assert from 'node:assert/strict';
import { once } from 'node:events';
import net from 'node:net';
import { after, before, describe, it } from 'node:test';
import { askHealthz } from './raw-connections.ts';
import { spawnApp, type AppProcess } from '../support/processes.ts';
import { metric } from './support.ts';

const CONNECTIONS_MAX = 3;
const DIRECT_TOKEN = 'a-direct-token-0123456789abcdef';
const BEARER = [`Authorization: Bearer ${DIRECT_TOKEN}`];

describe('the runtime binary with directListen.connectionsMax', () => {
  let runtime: AppProcess;
  let healthBase: string;
  let directPort: number;
  const held: net.Socket[] = [];

  before(async () => {
    runtime = await spawnApp('runtime', 'rt-connections', [
      ...['--runtime-id', 'rt-connections', '--scheduler-url', 'http://127.0.0.1:9'],
      ...['--join-token', 'a-join-token-0123456789abcdef', '--drain-delay-ms', '0'],
      ...['--health.enabled', 'true', '--health.host', '127.0.0.1', '--health.port', '0'],
      ...['--direct-listen.enabled', 'true', '--direct-listen.host', '127.0.0.1', '--direct-listen.port', '0'],
      ...['--direct-listen.token', DIRECT_TOKEN],
      ...['--direct-listen.connections-max', String(CONNECTIONS_MAX)],
    ]);
    const ready = await runtime.waitForLog((l) => l.msg === 'ready');
    healthBase = String(ready.health);
    directPort = Number(new URL(String(ready.direct)).port);
  });
  after(async () => {
    for (const socket of held) socket.destroy();
    await runtime.stop();
  });

  const open = (): net.Socket => {
    const socket = net.connect(directPort, '127.0.0.1');
    socket.on('error', () => {});
    return socket;
  };

  it('closes a connection past the cap unread, counts it and warns, and serves those it holds', async () => {
    for (let i = 0; i < CONNECTIONS_MAX; i++) {
      const socket = open();
      held.push(socket);
      const answer = await askHealthz(socket, BEARER);
      assert.match(answer, /^HTTP\/1\.1 200/, `connection ${i + 1} of ${CONNECTIONS_MAX} not served`);
    }
    const refused = open();
    assert.equal(await askHealthz(refused, BEARER), '', 'a connection past the cap was answered');
    if (!refused.destroyed) await once(refused, 'close');

    assert.equal(await metric(healthBase, 'switchyard_runtime_connections_refused_total'), 1);
    assert.equal(await metric(healthBase, 'switchyard_runtime_connections_open'), CONNECTIONS_MAX);
    assert.equal(await metric(healthBase, 'switchyard_runtime_connections_max'), CONNECTIONS_MAX);
    const warning = await runtime.waitForLog((l) => String(l.msg).startsWith('connection refused'));
    assert.equal(warning.connectionsMax, CONNECTIONS_MAX);
    assert.equal(warning.level, 40, 'logged as a warning');

    // The chart's probes go to the health listener: a full direct listener must not get the runtime restarted.
    const health = await fetch(`${healthBase}/healthz`, { signal: AbortSignal.timeout(5000) });
    assert.equal(health.status, 200, 'no /healthz on the health listener while the direct listener is full');
    await health.text();

    assert.match(await askHealthz(held[0]!, BEARER), /^HTTP\/1\.1 200/, 'a held connection is no longer served');
    held.shift()!.destroy();
    // The runtime counts the connection gone once it sees it close; a new one is served then.
    for (let attempt = 0; ; attempt++) {
      const socket = open();
      if (/^HTTP\/1\.1 200/.test(await askHealthz(socket, BEARER))) {
        held.push(socket);
        break;
      }
      assert.ok(attempt < 50, 'no room again after a held connection closed');
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  });
});
