// Acceptance at the process level: two gateway replicas sharing a route cache
// in a real redis-server. A session opened through one replica is served by
// the other from the shared cache, without asking a scheduler.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { certificateFor127 } from '@switchyard/service/testing';
import { startCluster, type TestCluster } from '../support/cluster.ts';
import { until } from '../support/processes.ts';
import {
  LEGACY,
  connect,
  initializeBody,
  metric,
  post,
  rpcResult,
  scrape,
  sessionOf,
  toolCallBody,
  whoami,
  redisMissing,
  redisTlsMissing,
  startRedis,
} from './support.ts';
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
    await sharedThroughRedis(cluster);
  });

  // Redis holds no state a session needs: killed mid-traffic, it costs each
  // replica a scheduling call per route it lacks (the thread fast path sends
  // it to the same runtime), no request, and a line or two in the log.
  it('serves every session on both replicas through a Redis crash and restart, and says so once', async () => {
    const sessions: Array<{ id: string; calls: number }> = [];
    let id = 100;
    const open = async (): Promise<void> => {
      const reply = await post(cluster.gatewayUrl(0), initializeBody());
      assert.equal(reply.status, 200, reply.text);
      sessions.push({ id: reply.headers.get('mcp-session-id')!, calls: 0 });
    };
    // Each session's counter, through both replicas in turn: a call that fails or lands in another sandbox shows.
    let round = 0;
    const counterRound = async (when: string): Promise<void> => {
      round++;
      for (const [i, session] of sessions.entries()) {
        const reply = await post(cluster.gatewayUrl((i + round) % 2), toolCallBody(id++, 'counter'), {
          'mcp-session-id': session.id,
          'mcp-protocol-version': LEGACY,
        });
        assert.equal(reply.status, 200, `${when}: ${reply.text}`);
        const content = rpcResult(reply).content as Array<{ text: string }>;
        assert.equal(Number(content[0]!.text), ++session.calls, `${when}: the session's own sandbox`);
      }
    };
    for (let i = 0; i < 4; i++) await open();
    await counterRound('before the crash');

    await redis.stop('SIGKILL');
    const crashedAt = performance.now();
    for (let i = 0; i < 3; i++) {
      // Opened on one replica, used on the other: no route in its memory, none in Redis.
      await open();
      await counterRound('while Redis is down');
    }
    redis = await startRedis({ port: redis.port });
    for (const gateway of cluster.gateways) {
      await until(`${gateway.name} to reconnect to Redis`, () =>
        gateway.logs.some((l) => l.msg === 'route cache redis connected again'),
      );
    }
    const awayMs = performance.now() - crashedAt;
    await open();
    await counterRound('after the restart');
    await sharedThroughRedis(cluster);

    for (const gateway of cluster.gateways) {
      const said = (msg: string): number => gateway.logs.filter((l) => l.msg === msg).length;
      assert.equal(said('route cache redis connected again'), 1, `${gateway.name}: back, once`);
      // One line per message per 10 s, whatever the number of requests (dozens here).
      for (const msg of new Set(
        gateway.logs.map((l) => String(l.msg)).filter((m) => m.startsWith('route cache redis')),
      )) {
        assert.ok(said(msg) <= Math.ceil(awayMs / 10_000) + 1, `${gateway.name}: "${msg}" ${said(msg)} times`);
      }
    }
  });
});

/** A session opened through gateway 0 is served by gateway 1 from Redis, without a scheduling call. */
async function sharedThroughRedis(cluster: TestCluster): Promise<void> {
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
}

const certificate = certificateFor127();
const tlsMissing = redisTlsMissing() || ('missing' in certificate ? certificate.missing : false);
if (tlsMissing) console.log(`skipping the TLS Redis suite: ${tlsMissing}`);

// A managed Redis as platform teams run one: TLS with a private CA, an ACL
// user held to the gateways' keys, a database of their own, a password.
describe('gateway replicas sharing a TLS Redis as an ACL user, in database 3', { skip: tlsMissing }, () => {
  const password = 'pw-7f3a91c2e5';
  let dir: string;
  let redis: RedisServer;
  let cluster: TestCluster;
  let url: string;
  const file = (name: string): string => join(dir, name);
  before(async () => {
    if ('missing' in certificate) return;
    dir = mkdtempSync(join(tmpdir(), 'switchyard-redis-tls-'));
    writeFileSync(file('tls.crt'), certificate.cert);
    writeFileSync(file('tls.key'), certificate.key);
    redis = await startRedis({
      tls: { certFile: file('tls.crt'), keyFile: file('tls.key') },
      args: [
        ...['--user', 'default', 'off'],
        // What docs/operations.md says the gateways need, and no more.
        ...['--user', 'gateways', 'on', `>${password}`, '~switchyard:route:*'],
        ...['+getex', '+set', '+pexpire', '+del', '+select', '+info'],
        ...['--user', 'admin', 'on', '>admin-pw', '~*', '+@all'],
      ],
    });
    url = `rediss://gateways:${password}@127.0.0.1:${redis.port}/3`;
    cluster = await startCluster({
      gateways: 2,
      gatewayArgs: ['--route-cache.redis-url', url],
      // The private CA, as the gateway chart's trustedCA mounts it.
      env: { NODE_EXTRA_CA_CERTS: file('tls.crt') },
    });
  });
  after(async () => {
    await cluster?.stop();
    await redis?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('shares routes there and shows the password nowhere: logs, --print-config, /metrics', async () => {
    await sharedThroughRedis(cluster);
    const admin = new Redis(`rediss://admin:admin-pw@127.0.0.1:${redis.port}/3`, {
      tls: { ca: readFileSync(file('tls.crt')) },
    });
    try {
      assert.ok((await admin.keys('switchyard:route:thread:*')).length > 0, 'routes in database 3');
      await admin.select(0);
      assert.deepEqual(await admin.keys('*'), [], 'nothing in database 0');
    } finally {
      admin.disconnect();
    }
    // Redis gone: what each gateway logs about it names the server, not the credentials.
    await redis.stop();
    for (const gateway of cluster.gateways) {
      await until(`${gateway.name} to log its Redis gone`, () =>
        gateway.logs.some((l) => l.msg === 'route cache redis error'),
      );
      assert.ok(!JSON.stringify(gateway.logs).includes(password), `${gateway.name}'s log`);
      const base = cluster.gatewayUrl(cluster.gateways.indexOf(gateway)).replace(/\/mcp$/, '');
      assert.ok(!(await scrape(base)).includes(password), `${gateway.name}'s /metrics`);
    }
    const printed = spawnSync(
      process.execPath,
      [
        'apps/gateway/src/main.ts',
        '--schedulers',
        'http://127.0.0.1:1',
        '--route-cache.redis-url',
        url,
        '--print-config',
      ],
      { cwd: join(import.meta.dirname, '../..'), encoding: 'utf8', timeout: 30_000 },
    );
    assert.equal(printed.status, 0, printed.stderr);
    assert.match(printed.stdout, /redisUrl: "\[redacted\]"/);
    assert.ok(!`${printed.stdout}${printed.stderr}`.includes(password), '--print-config');
  });
});
