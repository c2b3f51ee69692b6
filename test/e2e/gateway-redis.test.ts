// Acceptance at the process level: two gateway replicas sharing a route cache
// in a real redis-server. A session opened through one replica is served by
// the other from the shared cache, without asking a scheduler.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { startCluster, type TestCluster } from '../support/cluster.ts';
import { LEGACY, connect, metric, post, rpcResult, sessionOf, whoami, redisMissing, startRedis } from './support.ts';
import type { RedisServer } from './support.ts';

if (redisMissing) console.log(`skipping the shared route cache suite: ${redisMissing}`);

describe('gateway replicas sharing a Redis route cache', { skip: redisMissing }, () => {
  let redis: RedisServer;
  let cluster: TestCluster;
  before(async () => {
    redis = await startRedis();
    cluster = await startCluster({ gateways: 2, gatewayArgs: ['--route-cache.redis-url', redis.url] });
  });
  after(async () => {
    await cluster?.stop();
    await redis?.stop();
  });

  it('serves a session opened through one replica from the other without a scheduling call', async () => {
    const base = (i: number): string => cluster.gatewayUrl(i).replace(/\/mcp$/, '');
    const client = await connect('v2', cluster.gatewayUrl(0));
    try {
      const who = await whoami(client);
      const session = sessionOf(client);
      const schedulesBefore = await metric(base(1), 'switchyard_gateway_schedule_duration_seconds_count');
      const hitsBefore = await metric(base(1), 'switchyard_gateway_route_cache_lookups_total', {
        result: 'hit',
        tier: 'redis',
      });
      const reply = await post(
        cluster.gatewayUrl(1),
        { jsonrpc: '2.0', id: 5, method: 'tools/call', params: { name: 'whoami', arguments: {} } },
        { 'mcp-session-id': session, 'mcp-protocol-version': LEGACY },
      );
      assert.equal(reply.status, 200, reply.text);
      const content = rpcResult(reply).content as Array<{ text: string }>;
      assert.deepEqual(JSON.parse(content[0]!.text), who, 'the same runtime and sandbox answer');
      const hitsAfter = await metric(base(1), 'switchyard_gateway_route_cache_lookups_total', {
        result: 'hit',
        tier: 'redis',
      });
      assert.equal(hitsAfter, hitsBefore + 1, 'the second replica found the route in Redis');
      assert.equal(
        await metric(base(1), 'switchyard_gateway_schedule_duration_seconds_count'),
        schedulesBefore,
        'the second replica asked no scheduler',
      );
    } finally {
      await client.close();
    }
  });
});
