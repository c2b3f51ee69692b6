// The runtime binary's direct listener (the one gateways in direct mode dial,
// on the pod IP) holds at most directListen.connectionsMax connections: one
// more is closed unread, counted and warned of, and those it holds keep being
// served. A runtime process whose scheduler is never reached; raw sockets on
// loopback. Its metrics are on its health listener, which a full direct
// listener does not fill.
import type net from 'node:net';
import { after, before, describe, it } from 'node:test';
import { checkConnectionCap } from './raw-connections.ts';
import { spawnApp, type AppProcess } from '../support/processes.ts';

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

  it('closes a connection past the cap unread, counts it and warns, and serves those it holds', async () => {
    await checkConnectionCap({
      ...{ app: 'runtime', process: runtime, port: directPort, connectionsMax: CONNECTIONS_MAX },
      ...{ probeBase: healthBase, headers: BEARER, held },
    });
  });
});
