// What the gateway's metrics say of its Redis route cache failing. Requests
// go on without it (a lookup is a miss, a write is dropped), so the request
// counters show nothing; `route_cache_redis_failures_total{op}` does, for a
// Redis that is gone and for one that answers but refuses (full, with the
// `noeviction` policy). A real redis-server; the counter read from the
// registry's text output, as a scrape would.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { Registry } from 'prom-client';
import type { RedisServer } from '@switchyard/service/testing';
import { INITIALIZE, post, startHarness, type Harness } from './harness.ts';
import { PREFIX } from './fixtures/refusals.ts';
import { skip, startRedis } from './fixtures/redis.ts';

const NAME = `${PREFIX}route_cache_redis_failures_total`;
const OPS = ['read', 'write', 'renew', 'delete'];

/** The counter by `op`; an op without a series is left out (all of them when there is no such metric). */
async function failuresByOp(registry: Registry): Promise<Record<string, number>> {
  const text = registry.getSingleMetric(NAME) ? await registry.getSingleMetricAsString(NAME) : '';
  const counts: Record<string, number> = {};
  for (const [, op, value] of text.matchAll(/^\w+\{op="([^"]*)"\} (\S+)$/gm)) counts[op!] = Number(value);
  return counts;
}

/** Opens sessions until the gateway counts a failed write (at most 10 s). */
async function untilWriteFails(h: Harness, registry: Registry): Promise<number> {
  for (let deadline = performance.now() + 10_000; ; await sleep(50)) {
    assert.equal((await post(h.url, INITIALIZE)).status, 200, 'sessions open without redis');
    const { write = 0 } = await failuresByOp(registry);
    if (write > 0) return write;
    assert.ok(
      performance.now() < deadline,
      `no failed write counted within 10 s: ${JSON.stringify(await failuresByOp(registry))}`,
    );
  }
}

interface MeteredGateway {
  registry: Registry;
  redis: RedisServer;
  h: Harness;
}

/**
 * For the calling describe: a redis-server and a one-runtime gateway caching routes in it, with its metrics in
 * `registry`, started before its tests; after them the gateway closes and redis is stopped with `stopSignal`.
 */
function meteredGatewayOnRedis(stopSignal?: NodeJS.Signals): MeteredGateway {
  const suite = { registry: new Registry() } as MeteredGateway;
  before(async () => {
    suite.redis = await startRedis();
    suite.h = await startHarness(1, {
      routeCache: { redisUrl: suite.redis.url },
      metrics: { registry: suite.registry, prefix: PREFIX },
    });
  });
  after(async () => {
    await suite.h?.close();
    await suite.redis?.stop(stopSignal);
  });
  return suite;
}

describe('route cache redis failures in metrics, redis gone', { skip }, () => {
  const suite = meteredGatewayOnRedis('SIGKILL');

  it('exports each operation from 0, and counts the writes of sessions opened while redis is gone', async () => {
    const { registry, redis, h } = suite;
    assert.equal((await post(h.url, INITIALIZE)).status, 200);
    assert.deepEqual(await failuresByOp(registry), Object.fromEntries(OPS.map((op) => [op, 0])));
    await redis.stop('SIGKILL');
    assert.ok((await untilWriteFails(h, registry)) >= 1);
  });
});

describe('route cache redis failures in metrics, redis full', { skip }, () => {
  const suite = meteredGatewayOnRedis();

  it('counts the writes a full redis refuses while it is up and answering', async () => {
    const { registry, redis, h } = suite;
    assert.equal((await post(h.url, INITIALIZE)).status, 200);
    const client = new Redis(redis.url);
    try {
      // Filled by another writer past the memory it may use: every write after is refused with OOM.
      for (let i = 0; i < 8; i++) await client.set(`filler:${i}`, 'x'.repeat(256 << 10));
      await client.config('SET', 'maxmemory-policy', 'noeviction');
      await client.config('SET', 'maxmemory', String(1 << 20));
      assert.match(await client.set('probe', 'x').then(String, String), /OOM/);
    } finally {
      client.disconnect();
    }
    assert.ok((await untilWriteFails(h, registry)) >= 1);
  });
});
