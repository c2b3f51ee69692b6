// A class whose sandboxes cannot start (a stdio command that is not
// installed on the runtime's node): the runtime answers that the sandbox
// could not start, the gateway tries the other runtimes of the class, and
// once none is left the client is told what the last one said, not that
// the scheduler had no candidate "excluded by the request" (the gateway's
// own exclusions, of which the client knows nothing).
import assert from 'node:assert/strict';
import { once } from 'node:events';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { createGateway, type Gateway } from '@switchyard/gateway';
import { startRuntimeNode, type RuntimeNode } from '@switchyard/runtime';
import type { SchedulerReplica } from '@switchyard/scheduler';
import { createMetrics } from '@switchyard/service';
import { IN_PROCESS_TOKEN, startReplicas } from '../support/inprocess.ts';
import { until } from '../support/processes.ts';
import { MODERN, initializeBody, post } from './support.ts';

const quiet = { debug() {}, info() {}, warn() {}, error() {} };
const BROKEN = { 'x-switchyard-class': 'broken' };

describe('a class whose sandboxes cannot start', () => {
  let replicas: SchedulerReplica[] = [];
  let runtime: RuntimeNode | undefined;
  let gateway: Gateway | undefined;
  let server: http.Server | undefined;
  let url = '';

  before(async () => {
    replicas = await startReplicas(1);
    runtime = await startRuntimeNode({
      runtimeId: 'rt-broken',
      schedulerUrl: replicas[0]!.url,
      joinToken: IN_PROCESS_TOKEN,
      classes: { broken: { engine: 'stdio', command: '/nonexistent/switchyard-test/mcp-server' } },
      sandboxesMax: 4,
      sessionIdleMs: 60_000,
      tunnelPingIntervalMs: 300,
      logger: quiet,
      metrics: createMetrics('runtime'),
    });
    await runtime.whenConnected();
    gateway = createGateway({ schedulers: [replicas[0]!.url], defaultClass: 'broken' });
    server = http.createServer(gateway.app);
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/mcp`;
    // The runtime is schedulable once an epoch holds it.
    await until('the runtime in an epoch', async () => {
      const res = await fetch(`${replicas[0]!.url}/api/runtimes`);
      const { runtimes } = (await res.json()) as { runtimes: { id: string; available: boolean }[] };
      return runtimes.some((r) => r.id === 'rt-broken' && r.available);
    });
  });
  after(async () => {
    server?.closeAllConnections();
    if (server) await new Promise((resolve) => server!.close(resolve));
    await gateway?.close();
    await runtime?.close();
    await Promise.allSettled(replicas.map((r) => r.close()));
  });

  const cases = [
    { name: 'a legacy initialize', body: initializeBody(), headers: BROKEN },
    {
      name: 'a 2026-07-28 request',
      body: { jsonrpc: '2.0', id: 1, method: 'tools/list', params: {} },
      headers: { ...BROKEN, 'mcp-protocol-version': MODERN, 'mcp-method': 'tools/list', 'x-switchyard-process': 'p1' },
    },
  ];
  for (const c of cases) {
    it(`answers ${c.name} 502, saying the sandbox could not start`, async () => {
      const reply = await post(url, c.body, c.headers);
      const { error } = JSON.parse(reply.text) as { error: { message: string; data: { reason: string } } };
      assert.doesNotMatch(error.message, /excluded/, reply.text);
      assert.equal(reply.status, 502, reply.text);
      assert.equal(error.data.reason, 'upstream_unavailable');
      assert.match(error.message, /could not start/);
    });
  }
});
