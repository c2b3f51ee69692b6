import type { ChildProcess } from 'node:child_process';
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { EventEmitter } from 'node:events';
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { within } from '@switchyard/clock/testing';
import { REDIS_ROUTE_PREFIX, createGateway } from '@switchyard/gateway';
import type { Gateway } from '@switchyard/gateway';
import { INITIALIZE, connectV2, listen, post, startHarness, stopServer, textOf } from './harness.ts';
import type { Harness } from './harness.ts';
import { skip, startRedis } from './fixtures/redis.ts';
import type { RedisServer } from '@switchyard/service/testing';

if (skip) console.log(`# skipping redis route cache tests: ${skip}`);

/** A second gateway on the harness's scheduler, sharing `redisUrl` with the harness's own. */
async function secondGateway(h: Harness, redisUrl: string): Promise<SecondGateway> {
  const gateway = createGateway({ schedulers: [h.scheduler.url], upstreamMode: 'direct', routeCache: { redisUrl } });
  const { server, url } = await listen(gateway);
  return { gateway, url, stop: async () => (await stopServer(server), await gateway.close()) };
}

interface SecondGateway {
  gateway: Gateway;
  url: string;
  stop(): Promise<void>;
}

/**
 * A redis-server, a harness gateway with two runtimes and a second gateway,
 * both caching routes in it. `close()` wakes a stopped redis first, so that
 * the gateways' own closing does not wait on it.
 */
async function startSharedRedis(): Promise<{
  redis: { url: string; child: ChildProcess };
  h: Harness;
  second: SecondGateway;
  close(): Promise<void>;
}> {
  const redis = await startRedis();
  const h = await startHarness(2, { routeCache: { redisUrl: redis.url } });
  const second = await secondGateway(h, redis.url);
  return {
    redis,
    h,
    second,
    async close() {
      redis.child.kill('SIGCONT');
      await second.stop();
      await h.close();
      redis.child.kill('SIGTERM');
    },
  };
}

/**
 * Opens sessions on `h` every `everyMs` until the route of one is in the redis at `redisUrl`; fails with `what`
 * once `withinMs` have passed.
 */
async function untilRoutesReach(
  h: Harness,
  redisUrl: string,
  { withinMs, everyMs }: { withinMs: number; everyMs: number },
  what: string,
): Promise<void> {
  const client = new Redis(redisUrl);
  try {
    for (let deadline = performance.now() + withinMs; ; await sleep(everyMs)) {
      assert.ok(performance.now() < deadline, what);
      const init = await post(h.url, INITIALIZE);
      const session = init.headers.get('mcp-session-id')!;
      if ((await client.exists(`${REDIS_ROUTE_PREFIX}thread:${session}`)) === 1) return;
    }
  } finally {
    client.disconnect();
  }
}

describe('route cache shared through redis', { skip }, () => {
  let redis: { url: string; child: ChildProcess };
  let h: Harness;
  let second: SecondGateway;
  let close: (() => Promise<void>) | undefined;
  before(async () => {
    ({ redis, h, second, close } = await startSharedRedis());
  });
  after(() => close?.());

  it('lets a second gateway route a session opened on the first without asking the scheduler', async () => {
    const init = await post(h.url, INITIALIZE);
    assert.equal(init.status, 200);
    const session = init.headers.get('mcp-session-id')!;
    const schedules = h.scheduler.calls.length;
    const headers = { 'mcp-session-id': session, 'mcp-protocol-version': '2025-06-18' };
    const initialized = await post(second.url, { jsonrpc: '2.0', method: 'notifications/initialized' }, headers);
    assert.equal(initialized.status, 202);
    const listed = await post(second.url, { jsonrpc: '2.0', id: 2, method: 'tools/list' }, headers);
    assert.equal(listed.status, 200);
    assert.equal(h.scheduler.calls.length, schedules, 'no schedule call: the route came from redis');
    assert.equal(second.gateway.stats().routeCacheHits >= 1, true);
  });

  it('evicts the shared route on DELETE so the other gateway no longer finds it', async () => {
    const init = await post(h.url, INITIALIZE);
    const session = init.headers.get('mcp-session-id')!;
    const headers = { 'mcp-session-id': session, 'mcp-protocol-version': '2025-06-18' };
    const del = await fetch(second.url, { method: 'DELETE', headers });
    assert.equal(del.status, 200);
    const client = new Redis(redis.url);
    try {
      assert.equal(await client.exists(`${REDIS_ROUTE_PREFIX}thread:${session}`), 0, 'the shared key is gone');
    } finally {
      client.disconnect();
    }
    // The first gateway still holds the route in memory; the runtime's 404 evicts it there.
    const after = await post(h.url, { jsonrpc: '2.0', id: 3, method: 'tools/list' }, headers);
    assert.equal(after.status, 404, 'the session ended on the runtime');
    assert.equal((after.json as { id: number }).id, 3);
  });

  it('takes a malformed route in redis for a miss, so the session still reaches its runtime', async () => {
    const client = new Redis(redis.url);
    try {
      const wrong = [
        { runtime: 'rt-0', url: 'no url at all' },
        { runtime: 'rt-0', url: 'file:///etc/passwd' },
        { runtime: 'not an id', url: 'http://127.0.0.1:1/mcp' },
        { runtime: 'rt-0', url: 'http://127.0.0.1:1/mcp', principal: 42 },
      ];
      for (const value of wrong) {
        const init = await post(h.url, INITIALIZE);
        assert.equal(init.status, 200);
        const session = init.headers.get('mcp-session-id')!;
        await client.set(`${REDIS_ROUTE_PREFIX}thread:${session}`, JSON.stringify(value), 'PX', 60_000);
        const headers = { 'mcp-session-id': session, 'mcp-protocol-version': '2025-06-18' };
        for (const id of [2, 3]) {
          const listed = await post(second.url, { jsonrpc: '2.0', id, method: 'tools/list' }, headers);
          assert.equal(listed.status, 200, `${JSON.stringify(value)}: ${JSON.stringify(listed.json)}`);
        }
      }
    } finally {
      client.disconnect();
    }
  });
});

describe('route cache while redis is away', { skip }, () => {
  let redis: { url: string; child: ChildProcess };
  let h: Harness;
  const lines: { level: string; msg: string }[] = [];
  const logged = new EventEmitter();
  const at =
    (level: string) =>
    (_obj: object, msg?: string): void => {
      lines.push({ level, msg: msg ?? '' });
      logged.emit('line', msg ?? '');
    };
  /** Resolves at the next line logged with `msg`. */
  const nextLine = (msg: string): Promise<void> =>
    new Promise((resolve) => {
      const seen = (m: string): void => {
        if (m !== msg) return;
        logged.off('line', seen);
        resolve();
      };
      logged.on('line', seen);
    });
  before(async () => {
    redis = await startRedis();
    h = await startHarness(2, {
      routeCache: { redisUrl: redis.url },
      logger: { debug: at('debug'), info: at('info'), warn: at('warn'), error: at('error') },
    });
  });
  after(async () => {
    await h?.close();
    redis?.child.kill('SIGKILL');
  });

  it('serves sessions without waiting on redis, says so once, and shares routes again when it is back', async () => {
    const opened = await post(h.url, INITIALIZE);
    assert.equal(opened.status, 200, 'with redis up');
    const exited = new Promise((resolve) => redis.child.once('exit', resolve));
    const erred = nextLine('route cache redis error');
    redis.child.kill('SIGKILL');
    await exited;
    // The client has seen the connection go once it fails to reconnect.
    await within(erred, 10_000, 'no "route cache redis error" line after redis went');
    const took: number[] = [];
    for (let i = 0; i < 10; i++) {
      const started = performance.now();
      const init = await post(h.url, INITIALIZE);
      assert.equal(init.status, 200, JSON.stringify(init.json));
      const headers = { 'mcp-session-id': init.headers.get('mcp-session-id')!, 'mcp-protocol-version': '2025-06-18' };
      const listed = await post(h.url, { jsonrpc: '2.0', id: 2, method: 'tools/list' }, headers);
      assert.equal(listed.status, 200, 'the route was kept in memory');
      took.push(performance.now() - started);
    }
    // Each new session writes its route: held for the client's command
    // timeout (500 ms) with an offline queue, failed at once without one.
    const median = took.sort((a, b) => a - b)[took.length >> 1]!;
    assert.ok(median < 200, `a new session and one call took ${median.toFixed(0)} ms at the median`);
    const writeFailures = lines.filter((l) => l.msg === 'route cache redis write failed');
    assert.equal(writeFailures.length, 1, 'ten failed writes, one line');

    redis = await startRedis(Number(new URL(redis.url).port));
    await untilRoutesReach(h, redis.url, { withinMs: 10_000, everyMs: 50 }, 'routes reach redis again within 10 s');
    // Its return said once too (not at the first connection), or the warnings would just stop.
    const back = lines.filter((l) => l.msg === 'route cache redis connected again');
    assert.deepEqual(back, [{ level: 'info', msg: 'route cache redis connected again' }]);
  });
});

describe('route cache of a gateway started while redis is away', { skip }, () => {
  let redis: RedisServer;
  let h: Harness;
  const lines: { level: string; msg: string }[] = [];
  const at =
    (level: string) =>
    (_obj: object, msg?: string): void =>
      void lines.push({ level, msg: msg ?? '' });
  before(async () => {
    // Its port, to start it there once the gateway runs without it.
    redis = await startRedis();
    await redis.stop();
    h = await startHarness(1, {
      routeCache: { redisUrl: redis.url },
      logger: { debug: at('debug'), info: at('info'), warn: at('warn'), error: at('error') },
    });
  });
  after(async () => {
    await h?.close();
    await redis?.stop();
  });

  it('serves sessions without it, and says so when it comes', async () => {
    assert.equal((await post(h.url, INITIALIZE)).status, 200, 'served without redis');
    assert.ok(lines.some((l) => l.msg === 'route cache redis error'));
    redis = await startRedis(redis.port);
    await untilRoutesReach(h, redis.url, { withinMs: 10_000, everyMs: 50 }, 'routes reach redis within 10 s');
    // Its warnings just stopping would tell an operator nothing.
    const back = lines.filter((l) => l.msg === 'route cache redis connected again');
    assert.deepEqual(back, [{ level: 'info', msg: 'route cache redis connected again' }]);
  });
});

describe('route cache ttl in redis', { skip }, () => {
  const ttlMs = 2000;
  let redis: { url: string; child: ChildProcess };
  let h: Harness;
  before(async () => {
    redis = await startRedis();
    h = await startHarness(1, { routeCache: { redisUrl: redis.url, ttlMs } });
  });
  after(async () => {
    await h?.close();
    redis?.child.kill('SIGTERM');
  });

  it('keeps the shared route of a session in use on one replica past the ttl', async () => {
    const init = await post(h.url, INITIALIZE);
    assert.equal(init.status, 200);
    const session = init.headers.get('mcp-session-id')!;
    const headers = { 'mcp-session-id': session, 'mcp-protocol-version': '2025-06-18' };
    const client = new Redis(redis.url);
    try {
      // Time passing is what is tested: the session is used well within its
      // ttl, for two ttls, each request answered from this replica's memory.
      for (const started = performance.now(); performance.now() - started < 2 * ttlMs; await sleep(ttlMs / 8)) {
        const listed = await post(h.url, { jsonrpc: '2.0', id: 2, method: 'tools/list' }, headers);
        assert.equal(listed.status, 200);
      }
      assert.ok(h.gateway.stats().routeCacheHits >= 8, 'the requests were memory hits');
      const left = await client.pttl(`${REDIS_ROUTE_PREFIX}thread:${session}`);
      assert.ok(left > 0, `the shared route is still there (pttl ${left})`);
      // Renewing never brings back a route deleted meanwhile (another replica's DELETE).
      await client.del(`${REDIS_ROUTE_PREFIX}thread:${session}`);
      for (const started = performance.now(); performance.now() - started < ttlMs / 2; await sleep(ttlMs / 8)) {
        assert.equal((await post(h.url, { jsonrpc: '2.0', id: 3, method: 'tools/list' }, headers)).status, 200);
      }
      assert.equal(await client.exists(`${REDIS_ROUTE_PREFIX}thread:${session}`), 0, 'not written again');
    } finally {
      client.disconnect();
    }
  });
});

describe('route cache while redis hangs', { skip }, () => {
  let redis: { url: string; child: ChildProcess };
  let h: Harness;
  let second: SecondGateway;
  let close: (() => Promise<void>) | undefined;
  before(async () => {
    ({ redis, h, second, close } = await startSharedRedis());
  });
  after(() => close?.());

  it('stops waiting on a redis that keeps its connection but answers nothing', async () => {
    // Both gateways connected and sharing routes first.
    const first = await post(h.url, INITIALIZE);
    const firstHeaders = {
      'mcp-session-id': first.headers.get('mcp-session-id')!,
      'mcp-protocol-version': '2025-06-18',
    };
    assert.equal((await post(second.url, { jsonrpc: '2.0', id: 2, method: 'tools/list' }, firstHeaders)).status, 200);
    // A stopped process: the connection stays up, commands go unanswered (as behind a lost route).
    redis.child.kill('SIGSTOP');
    const took: number[] = [];
    for (let i = 0; i < 10; i++) {
      const started = performance.now();
      const init = await post(h.url, INITIALIZE);
      assert.equal(init.status, 200, JSON.stringify(init.json));
      const headers = { 'mcp-session-id': init.headers.get('mcp-session-id')!, 'mcp-protocol-version': '2025-06-18' };
      // The second gateway has no route in memory: it asks redis, then the scheduler.
      const listed = await post(second.url, { jsonrpc: '2.0', id: 2, method: 'tools/list' }, headers);
      assert.equal(listed.status, 200);
      took.push(performance.now() - started);
    }
    const median = took.sort((a, b) => a - b)[took.length >> 1]!;
    assert.ok(median < 200, `a new session and one call on another replica took ${median.toFixed(0)} ms at the median`);

    // Once it answers again (on a new connection), routes are shared again.
    redis.child.kill('SIGCONT');
    await untilRoutesReach(h, redis.url, { withinMs: 15_000, everyMs: 100 }, 'routes reach redis again within 15 s');
  });
});

describe('route cache in a redis shared by two deployments', { skip }, () => {
  let redis: { url: string; child: ChildProcess };
  const deployments: Harness[] = [];
  before(async () => {
    redis = await startRedis();
    // Two installs (staging and production, two tenants), each its own scheduler and runtime.
    for (const redisKeyPrefix of ['staging:route:', 'prod:route:']) {
      deployments.push(await startHarness(1, { routeCache: { redisUrl: redis.url, redisKeyPrefix } }));
    }
  });
  after(async () => {
    for (const h of deployments) await h.close();
    redis?.child.kill('SIGTERM');
  });

  it('keeps each one to its key prefix, so a sandbox name both use reaches its own runtime', async () => {
    const [staging, prod] = deployments as [Harness, Harness];
    const counts = async (h: Harness, calls: number): Promise<string[]> => {
      const client = await connectV2(h.url, 'modern', { 'X-Switchyard-Process': 'shared-name' });
      try {
        const seen: string[] = [];
        for (let i = 0; i < calls; i++) seen.push(textOf(await client.callTool({ name: 'counter', arguments: {} })));
        return seen;
      } finally {
        await client.close();
      }
    };
    assert.deepEqual(await counts(staging, 2), ['1', '2']);
    const prodSchedules = prod.scheduler.calls.length;
    // Read from staging's route, this would be staging's sandbox, counting on from 2.
    assert.deepEqual(await counts(prod, 2), ['1', '2'], "production's own sandbox");
    assert.ok(prod.scheduler.calls.length > prodSchedules, "production's gateway asked its own scheduler");
    const client = new Redis(redis.url);
    try {
      const keys = (await client.keys('*')).sort();
      assert.deepEqual(keys, ['prod:route:process:default/shared-name', 'staging:route:process:default/shared-name']);
      // A Redis shared with other apps holds no key of this gateway without an expiry.
      for (const key of keys) assert.ok((await client.pttl(key)) > 0, `${key} expires`);
    } finally {
      client.disconnect();
    }
  });
});

describe('route cache in redis with bearer auth', { skip }, () => {
  const ALICE = 'alice-token-0123456789';
  const BOB = 'bob-token-9876543210';
  const auth = (token: string): Record<string, string> => ({ authorization: `Bearer ${token}` });
  let redis: RedisServer;
  const gateways: Harness[] = [];
  before(async () => {
    redis = await startRedis();
    const options = { auth: { mode: 'bearer' as const, tokens: [ALICE, BOB] }, routeCache: { redisUrl: redis.url } };
    const first = await startHarness(1, options);
    gateways.push(first, await startHarness(0, options, first.scheduler));
  });
  after(async () => {
    for (const h of gateways.reverse()) await h.close();
    await redis?.stop();
  });

  it("keeps a session shared through redis to its principal: another's request is 404, its own is served", async () => {
    const [first, second] = gateways as [Harness, Harness];
    const init = await post(first.url, INITIALIZE, auth(ALICE));
    assert.equal(init.status, 200);
    const session = init.headers.get('mcp-session-id')!;
    const client = new Redis(redis.url);
    try {
      const stored = JSON.parse((await client.get(`${REDIS_ROUTE_PREFIX}thread:${session}`))!) as {
        principal?: string;
      };
      assert.match(stored.principal ?? '', /^token:/, 'the shared route names its principal');
    } finally {
      client.disconnect();
    }
    const list = { jsonrpc: '2.0', id: 2, method: 'tools/list' };
    const schedules = first.scheduler.calls.length;
    const bob = await post(second.url, list, { ...auth(BOB), 'mcp-session-id': session });
    assert.equal(bob.status, 404, JSON.stringify(bob.json));
    const alice = await post(second.url, list, { ...auth(ALICE), 'mcp-session-id': session });
    assert.equal(alice.status, 200, JSON.stringify(alice.json));
    assert.equal(first.scheduler.calls.length, schedules, 'both answered from the shared route');
  });
});
