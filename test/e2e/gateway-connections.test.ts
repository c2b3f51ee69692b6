// The gateway binary holds at most connectionsMax client connections on its
// /mcp port: one more is closed unread, counted and warned of, and those it
// holds keep being served. A gateway process whose scheduler is never
// reached; raw sockets on loopback. Its metrics are on a port of their own,
// which a full /mcp port would not let a scrape through.
import type net from 'node:net';
import { after, before, describe, it } from 'node:test';
import { checkConnectionCap } from './raw-connections.ts';
import { spawnApp, type AppProcess } from '../support/processes.ts';

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

  it('closes a connection past the cap unread, counts it and warns, and serves those it holds', async () => {
    const port = gateway.port!;
    await checkConnectionCap({
      app: 'gateway',
      process: gateway,
      port,
      connectionsMax: CONNECTIONS_MAX,
      probeBase: metricsBase,
      held,
    });
  });
});
