// A scheduler replica has one port for tunnels, gateways, peers and probes:
// a flood that holds it full (connectionsMax) refuses the kubelet's liveness
// probe too, and a probe refused for 30 s gets the replica restarted, closing
// every tunnel it holds. With metricsPort, /healthz and /metrics answer on a
// listener of their own. A scheduler as a process; raw sockets on loopback.
import assert from 'node:assert/strict';
import net from 'node:net';
import { after, before, describe, it } from 'node:test';
import { askHealthz } from './raw-connections.ts';
import { spawnApp, type AppProcess } from '../support/processes.ts';
import { metric } from './support.ts';

const CONNECTIONS_MAX = 3;

describe('a scheduler replica with metricsPort', () => {
  let scheduler: AppProcess;
  let metricsBase: string;
  const held: net.Socket[] = [];

  before(async () => {
    scheduler = await spawnApp('scheduler', 'sched-metrics-port', [
      ...['--host', '127.0.0.1', '--port', '0', '--metrics-port', '0', '--drain-delay-ms', '0'],
      ...['--join-tokens', 'a-join-token-0123456789abcdef', '--connections-max', String(CONNECTIONS_MAX)],
    ]);
    const ready = await scheduler.waitForLog((l) => l.msg === 'ready');
    assert.match(String(ready.metrics), /^http:\/\/127\.0\.0\.1:[1-9]\d*\/metrics$/, 'its ready line says where');
    metricsBase = new URL(String(ready.metrics)).origin;
  });
  after(async () => {
    for (const socket of held) socket.destroy();
    await scheduler.stop();
  });

  const open = (port: number): net.Socket => {
    const socket = net.connect(port, '127.0.0.1');
    socket.on('error', () => {});
    return socket;
  };

  it('answers /healthz and /metrics there while the replica port is full and refuses its probes', async () => {
    // Kept-alive connections that were served: the replica holds them idle for a minute.
    for (let i = 0; i < CONNECTIONS_MAX; i++) {
      const socket = open(scheduler.port!);
      held.push(socket);
      assert.match(await askHealthz(socket), /^HTTP\/1\.1 200/, `connection ${i + 1} of ${CONNECTIONS_MAX} not served`);
    }
    // What the kubelet meets on the replica's port now: its probe is closed unanswered.
    assert.equal(await askHealthz(open(scheduler.port!)), '', 'a probe past the cap was answered');

    const health = await fetch(`${metricsBase}/healthz`, { signal: AbortSignal.timeout(5000) });
    assert.equal(health.status, 200, 'no /healthz on the metrics port while the replica port is full');
    await health.text();
    assert.equal(await metric(metricsBase, 'switchyard_scheduler_connections_open'), CONNECTIONS_MAX);
    assert.ok((await metric(metricsBase, 'switchyard_scheduler_connections_refused_total')) >= 1);
    // Readiness stays with the replica's port, which a full port fails: the pod turns unready, not restarted.
    const readyz = await fetch(`${metricsBase}/readyz`, { signal: AbortSignal.timeout(5000) });
    assert.equal(readyz.status, 404);
    await readyz.text();
  });
});
