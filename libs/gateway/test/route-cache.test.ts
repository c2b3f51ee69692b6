// The route cache's memory tier, as every request meets it: a hit is
// answered at once and counted; a miss without Redis is counted as a memory
// miss; a route learnt in the background replaces only the one it was
// learnt for; and lookups spread out in time, as requests are, do not set a timer
// each (the LRU library's clock cache does at its default resolution). The
// Redis tier is tested against a real server in redis.test.ts and
// redis-endpoints.test.ts.
import assert from 'node:assert/strict';
import { createHook } from 'node:async_hooks';
import { describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import v8 from 'node:v8';
import { systemClock } from '@switchyard/clock';
import { createGateway } from '@switchyard/gateway';
import { RouteCache } from '../src/route-cache.ts';
import { ThrottledLog } from '../src/throttled-log.ts';

const silent = { debug() {}, info() {}, warn() {}, error() {} };
const route = { runtime: 'rt-1', url: 'http://127.0.0.1:1/mcp' };

function cacheWithLookups(maxEntries = 10): { cache: RouteCache; lookups: string[] } {
  const lookups: string[] = [];
  const cache = new RouteCache({
    maxEntries,
    ttlMs: 60_000,
    upstreamLog: new ThrottledLog(silent, systemClock),
    onLookup: (result, tier) => lookups.push(`${result} ${tier}`),
  });
  return { cache, lookups };
}

/** Timers created while `work` runs (Node's own, whoever sets them). */
async function timersSetDuring(work: () => Promise<void>): Promise<number> {
  let timers = 0;
  const hook = createHook({
    init(_id, type) {
      if (type === 'Timeout') timers++;
    },
  }).enable();
  try {
    await work();
  } finally {
    hook.disable();
  }
  return timers;
}

describe('route cache memory tier', () => {
  it('answers a stored route at once and counts a memory hit', async () => {
    const { cache, lookups } = cacheWithLookups();
    await cache.set('thread:a', route);
    assert.deepEqual(cache.local('thread:a'), route);
    assert.deepEqual(lookups, ['hit memory']);
    await cache.close();
  });

  it('counts a miss as a memory miss when there is no redis', async () => {
    const { cache, lookups } = cacheWithLookups();
    assert.equal(cache.local('thread:b'), undefined);
    assert.equal(await cache.remote('thread:b'), undefined);
    assert.deepEqual(lookups, ['miss memory']);
    await cache.close();
  });

  it('forgets a deleted route', async () => {
    const { cache } = cacheWithLookups();
    await cache.set('thread:c', route);
    await cache.delete('thread:c');
    assert.equal(cache.local('thread:c'), undefined);
    await cache.close();
  });

  it('replaces a route only while it still holds the one replaced, counting no lookup', async () => {
    const { cache, lookups } = cacheWithLookups();
    const moved = { runtime: 'rt-1', url: 'http://127.0.0.1:2/mcp' };
    await cache.set('thread:d', route);
    assert.equal(await cache.replace('thread:d', route, moved), true);
    assert.deepEqual(lookups, []);
    assert.deepEqual(cache.local('thread:d'), moved);
    // Evicted meanwhile (the session ended): not brought back.
    await cache.delete('thread:d');
    assert.equal(await cache.replace('thread:d', route, moved), false);
    // Replaced by another route meanwhile: left alone.
    await cache.set('thread:d', route);
    await cache.set('thread:d', { runtime: 'rt-2', url: 'http://127.0.0.1:3/mcp' });
    assert.equal(await cache.replace('thread:d', route, moved), false);
    assert.equal(cache.local('thread:d')?.runtime, 'rt-2');
    await cache.close();
  });

  it('sets no timer per lookup for lookups a few milliseconds apart', async () => {
    const { cache } = cacheWithLookups();
    await cache.set('thread:d', route);
    const lookups = 20;
    // Each pause sets one timer of its own; anything beyond those is the cache's.
    const timers = await timersSetDuring(async () => {
      for (let i = 0; i < lookups; i++) {
        assert.deepEqual(cache.local('thread:d'), route);
        await sleep(3);
      }
    });
    assert.ok(timers - lookups <= 2, `${timers - lookups} timers set by ${lookups} lookups`);
    await cache.close();
  });
});

describe('route cache memory per entry', () => {
  // A gateway holds a route per open session, 10,000 idle ones in the
  // benchmark: what the cache adds to each is in every one of them.
  it('keeps no object of its own beside each route when there is no redis', async () => {
    const entries = 2000;
    const { cache } = cacheWithLookups(entries);
    const routes = Array.from({ length: entries }, (_, i) => ({ runtime: 'rt-1', url: `http://127.0.0.1:${i}/mcp` }));
    const keys = routes.map((_, i) => `thread:${i}`);
    // One round first, so that what the library allocates once is not counted.
    for (const key of keys) await cache.set(key, route);
    for (const key of keys) await cache.delete(key);
    // Live objects after a full collection: a wrapper per route (a time to renew it in Redis) adds one a set.
    const before = v8.queryObjects(Object, { format: 'count' }) as number;
    for (let i = 0; i < entries; i++) await cache.set(keys[i]!, routes[i]!);
    const added = (v8.queryObjects(Object, { format: 'count' }) as number) - before;
    assert.ok(added < entries / 10, `${added} objects added by ${entries} routes`);
    assert.deepEqual(cache.local(keys[7]!), routes[7]);
    await cache.close();
  });
});

describe('route cache memory up front', () => {
  // The limit (100,000 by default) is a bound, not a size: a gateway holding
  // few sessions, or 10,000, should not pay for 100,000 from its start.
  it('allocates nothing for its entry limit before routes are kept', async () => {
    /** V8 heap and ArrayBuffer bytes in use after a full collection (queryObjects makes one). */
    const inUse = (): number => {
      v8.queryObjects(Object, { format: 'count' });
      return v8.getHeapStatistics().used_heap_size + process.memoryUsage().arrayBuffers;
    };
    const before = inUse();
    const { cache } = cacheWithLookups(100_000);
    const added = inUse() - before;
    // Preallocated, the library's arrays for 100,000 entries take 4.4 MB.
    assert.ok(added < 256 * 1024, `${added} bytes taken by an empty cache of 100,000 entries`);
    await cache.close();
  });

  it('still holds no more than its entry limit', async () => {
    const { cache } = cacheWithLookups(3);
    for (const key of ['thread:1', 'thread:2', 'thread:3']) await cache.set(key, route);
    // thread:1 used last but one: thread:2 is the least recently used when thread:4 comes.
    cache.local('thread:1');
    await cache.set('thread:4', route);
    assert.equal(cache.size, 3);
    assert.equal(cache.local('thread:2'), undefined);
    for (const key of ['thread:1', 'thread:3', 'thread:4']) assert.deepEqual(cache.local(key), route, key);
    await cache.close();
  });
});

describe('route cache redis URL', () => {
  // Misread by ioredis, each ran a gateway without its shared cache (or dialled elsewhere) instead of failing.
  it('is refused by createGateway when ioredis would misread it, and the error does not quote it', () => {
    for (const url of ['redis://:SECRET#1@h:6379', 'redis://h:6379/cache', 'REDISS://:SECRET@h:6380']) {
      assert.throws(
        () => createGateway({ schedulers: ['http://127.0.0.1:1'], routeCache: { redisUrl: url } }),
        (error: Error) => /routeCache\.redisUrl/.test(error.message) && !error.message.includes('SECRET'),
        url,
      );
    }
  });
});
