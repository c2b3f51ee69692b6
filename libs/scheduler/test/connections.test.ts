// A replica's listener holds at most connectionsMax connections: a flood of
// connections that never authenticate (here: silent ones, which the sniffer
// and header deadlines would hold for seconds each) cannot take more, and the
// runtime tunnel already open keeps serving through it.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { once } from 'node:events';
import net from 'node:net';
import { MemoryLeaseStore } from '@switchyard/election';
import type { RuntimeNode } from '@switchyard/runtime';
import type { SchedulerReplica } from '@switchyard/scheduler';
import { createMetrics } from '@switchyard/service';
import { getJson, quietLogger, startReplicas, startRuntime, until } from './support.ts';

const CONNECTIONS_MAX = 4;

describe('a replica with connectionsMax', () => {
  const metrics = createMetrics('scheduler');
  const warnings: string[] = [];
  const logger = { ...quietLogger, warn: (_fields: object, message?: string) => void warnings.push(message ?? '') };
  let replica: SchedulerReplica;
  let runtime: RuntimeNode;
  const silent: net.Socket[] = [];

  before(async () => {
    const replicas = await startReplicas(1, new MemoryLeaseStore(), logger, {
      connectionsMax: CONNECTIONS_MAX,
      metrics,
    });
    replica = replicas[0]!;
    runtime = await startRuntime('r1', replica.url);
    await until('the runtime available', async () => {
      const { body } = await getJson(`${replica.url}/api/runtimes`);
      return body.runtimes.some((r: { id: string; available: boolean }) => r.id === 'r1' && r.available) || undefined;
    });
  });
  after(async () => {
    for (const socket of silent) socket.destroy();
    await runtime.close();
    await replica.close();
  });

  const connections = (): Promise<number> =>
    new Promise((resolve) => replica.server.getConnections((_error, count) => resolve(count)));

  it('closes connections past the cap unread, counts and warns of them, and keeps the tunnel serving', async () => {
    // Fill the listener with connections that say nothing, beside the runtime's tunnel.
    for (let count = await connections(); count < CONNECTIONS_MAX;) {
      assert.ok(silent.length < CONNECTIONS_MAX, 'more silent connections taken than the cap allows');
      const socket = net.connect(replica.port, '127.0.0.1');
      socket.on('error', () => {});
      silent.push(socket);
      const before = count;
      count = await until('the replica counts it', async () => {
        const now = await connections();
        return now > before ? now : undefined;
      });
    }

    const refused = net.connect(replica.port, '127.0.0.1');
    refused.on('error', () => {});
    refused.write(`GET /api/runtime/connect HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n`);
    let answered = '';
    refused.on('data', (chunk: Buffer) => (answered += chunk.toString()));
    await once(refused, 'close');
    assert.equal(answered, '', 'a connection past the cap was answered');

    const text = await metrics.registry.getSingleMetricAsString('switchyard_scheduler_connections_refused_total');
    assert.match(text, /^switchyard_scheduler_connections_refused_total 1$/m);
    const open = await metrics.registry.getSingleMetricAsString('switchyard_scheduler_connections_open');
    assert.match(open, new RegExp(`^switchyard_scheduler_connections_open ${CONNECTIONS_MAX}$`, 'm'));
    assert.deepEqual(
      warnings.filter((w) => w.startsWith('connection refused')),
      ['connection refused: the listener holds connectionsMax connections already'],
    );

    // The tunnel opened before the flood is untouched: once the flood ends, the runtime is still served.
    for (const socket of silent.splice(0)) socket.destroy();
    await until('room again', async () => (await connections()) < CONNECTIONS_MAX || undefined);
    const { status, body } = await getJson(`${replica.url}/api/proxy/r1/healthz`);
    assert.equal(status, 200, JSON.stringify(body));
  });
});
