// A cluster on a machine that speaks IPv6 only: schedulers, gateway and
// runtimes listen on ::1 and name each other by http://[::1]:<port> URLs, as
// on an IPv6-only network, and no process is on 127.0.0.1. Every address a
// component advertises or logs must be a URL others can dial: an IPv6
// literal in brackets, never `http://::1:<port>`.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { startCluster, type TestCluster } from '../support/cluster.ts';
import {
  LEGACY,
  connect,
  counter,
  ipv6Missing,
  metric,
  post,
  redisMissing,
  rpcResult,
  sessionOf,
  sessionsAcross,
  startRedis,
  whoami,
  type AnyClient,
} from './support.ts';

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

  it('shares routes between gateways through a Redis at redis://[::1]:<port>', { skip: redisMissing }, async () => {
    const redis = await startRedis({ host: '::1' });
    const args = ['--route-cache.redis-url', redis.url];
    const [a, b] = [await cluster.addGateway(undefined, { args }), await cluster.addGateway(undefined, { args })];
    const client = await connect('v2', `http://[::1]:${a.port}/mcp`);
    try {
      const who = await whoami(client);
      const hits = () =>
        metric(`http://[::1]:${b.port}`, 'switchyard_gateway_route_cache_lookups_total', {
          result: 'hit',
          tier: 'redis',
        });
      const before = await hits();
      const reply = await post(
        `http://[::1]:${b.port}/mcp`,
        { jsonrpc: '2.0', id: 5, method: 'tools/call', params: { name: 'whoami', arguments: {} } },
        { 'mcp-session-id': sessionOf(client), 'mcp-protocol-version': LEGACY },
      );
      assert.equal(reply.status, 200, reply.text);
      const content = rpcResult(reply).content as Array<{ text: string }>;
      assert.deepEqual(JSON.parse(content[0]!.text), who, 'the same runtime and sandbox answer');
      assert.equal(await hits(), before + 1, 'the route came from Redis');
    } finally {
      await client.close();
      await redis.stop();
    }
  });
});
