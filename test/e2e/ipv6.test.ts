// A cluster on a machine that speaks IPv6 only: schedulers, gateway and
// runtimes listen on ::1 and name each other by http://[::1]:<port> URLs, as
// on an IPv6-only network, and no process is on 127.0.0.1. Every address a
// component advertises or logs must be a URL others can dial: an IPv6
// literal in brackets, never `http://::1:<port>`.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { startCluster, type TestCluster } from '../support/cluster.ts';
import { connect, counter, ipv6Missing, metric, sessionsAcross, whoami, type AnyClient } from './support.ts';

const TOKEN = 'direct-token-0123456789abcdef';
const RUNTIME_ARGS = [
  ...['--direct-listen.enabled', 'true', '--direct-listen.host', '::1', '--direct-listen.token', TOKEN],
  ...['--health.enabled', 'true', '--health.host', '::1'],
];

describe('a cluster on IPv6 loopback', { skip: ipv6Missing }, () => {
  let cluster: TestCluster;
  before(async () => {
    // Two replicas, one runtime on each: epochs sync and proxy hops run between peers at [::1] URLs.
    cluster = await startCluster({ host: '::1', schedulers: 2, runtimes: 2, gateways: 1, runtimeArgs: RUNTIME_ARGS });
  });
  after(() => cluster?.stop());

  it('logs ready with URLs that answer: the gateway /mcp, each runtime health listener', async () => {
    const gateway = cluster.gateways[0]!;
    const ready = await gateway.waitForLog((l) => l.msg === 'ready');
    assert.equal(ready.url, `http://[::1]:${gateway.port}/mcp`);
    const client = await connect('v2', String(ready.url));
    try {
      assert.ok(['r0', 'r1'].includes((await whoami(client)).runtime));
    } finally {
      await client.close();
    }
    for (const runtime of cluster.runtimes) {
      const health = (await runtime.waitForLog((l) => l.msg === 'ready')).health;
      assert.match(String(health), /^http:\/\/\[::1\]:\d+$/, runtime.name);
      assert.equal((await fetch(`${String(health)}/healthz`)).status, 200, runtime.name);
    }
  });

  it('advertises each runtime direct listener on ::1 as http://[::1]:<port>, which a direct-mode gateway dials', async () => {
    for (const runtime of cluster.runtimes) {
      const ready = await runtime.waitForLog((l) => l.msg === 'ready');
      assert.match(String(ready.direct), /^http:\/\/\[::1\]:\d+$/, runtime.name);
    }
    const scheduler = cluster.schedulerUrls()[0]!;
    const through = async (): Promise<number> =>
      (await metric(scheduler, 'switchyard_scheduler_proxy_requests_total')) +
      (await metric(scheduler, 'switchyard_scheduler_relay_connections_total'));
    const before = await through();
    const gateway = await cluster.addGateway(undefined, {
      args: ['--upstream-mode', 'direct', '--upstream-token', TOKEN],
    });
    const clients: AnyClient[] = [];
    try {
      const placed = await sessionsAcross(`http://[::1]:${gateway.port}/mcp`, clients);
      assert.deepEqual([...placed].sort(), ['r0', 'r1']);
      for (const client of clients) assert.equal(await counter(client), 1);
      assert.equal(await through(), before, 'no request went through the scheduler');
    } finally {
      await Promise.all(clients.map((c) => c.close()));
    }
  });
});
