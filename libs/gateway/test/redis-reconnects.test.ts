// How often a gateway dials its Redis while Redis will not serve it, counted
// at a TCP endpoint in front of real redis-servers: hundreds of gateways
// dialling at their fastest would meet a recovering Redis together. Dial
// counts are upper bounds, so a slow machine only makes them easier to meet.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { INITIALIZE, post } from './harness.ts';
import type { Harness } from './harness.ts';
import { skip } from './fixtures/redis.ts';
import { failoverBehindEndpoint } from './fixtures/redis-endpoint.ts';

/** How long Redis is kept from serving: long enough for the backoff to reach its longest pause. */
const AWAY_MS = 6_000;
/** Pause between the sessions a gateway opens meanwhile: each writes its route. */
const SESSION_EVERY_MS = 20;

/** Opens sessions on `h` for `ms`, each served (Redis is a cache); resolves with how many. */
async function openSessionsFor(h: Harness, ms: number): Promise<number> {
  let opened = 0;
  for (const deadline = performance.now() + ms; performance.now() < deadline; await sleep(SESSION_EVERY_MS)) {
    const init = await post(h.url, INITIALIZE);
    assert.equal(init.status, 200, JSON.stringify(init.json));
    opened++;
  }
  return opened;
}

/** Opens sessions until one's route is in the Redis at `redisUrl`; fails with `what` after `withinMs`. */
async function untilStored(
  stored: (url: string) => Promise<boolean>,
  redisUrl: string,
  withinMs: number,
  what: string,
) {
  for (const deadline = performance.now() + withinMs; !(await stored(redisUrl)); await sleep(50)) {
    assert.ok(performance.now() < deadline, what);
  }
}

describe('route cache while its redis accepts connections and answers nothing', { skip }, () => {
  const suite = failoverBehindEndpoint();

  it('dials it at a pace that slows down, and is back on it soon after it answers', async () => {
    const { primary, endpoint, h, stored } = suite;
    assert.equal(await stored(primary.url), true, 'routes reach redis');
    // Stopped, overloaded, or a proxy in front of a Redis in a failover: the kernel still accepts.
    primary.child.kill('SIGSTOP');
    const dialled = endpoint.dials;
    const opened = await openSessionsFor(h, AWAY_MS);
    const dials = endpoint.dials - dialled;
    // Each dial waits 500 ms for an answer, then pauses 50 ms doubling to 2 s, jittered: about 7 dials.
    assert.ok(dials <= 10, `${dials} dials in ${AWAY_MS} ms (${opened} sessions opened meanwhile)`);
    primary.child.kill('SIGCONT');
    await untilStored(stored, primary.url, 5_000, 'routes reach redis again within 5 s');
  });
});

describe('route cache while its endpoint still leads to a demoted primary', { skip }, () => {
  const suite = failoverBehindEndpoint();

  it('dials it at a pace that slows down, and follows the endpoint soon after it moves', async () => {
    const { primary, promoted, endpoint, h, stored } = suite;
    assert.equal(await stored(primary.url), true, 'routes reach the primary');
    // The failover demotes the primary before the endpoint moves (a DNS name's TTL, a proxy's health check):
    // every connection to it becomes ready, then its first write is answered READONLY.
    const admin = new Redis(primary.url);
    try {
      await admin.replicaof('127.0.0.1', promoted.port);
    } finally {
      admin.disconnect();
    }
    const dialled = endpoint.dials;
    const opened = await openSessionsFor(h, AWAY_MS);
    const dials = endpoint.dials - dialled;
    // A connection that was ready for a moment does not start the backoff over: about 10 dials.
    assert.ok(dials <= 20, `${dials} dials in ${AWAY_MS} ms (${opened} sessions opened meanwhile)`);
    endpoint.target = promoted.port;
    await untilStored(stored, promoted.url, 5_000, 'routes reach the new primary within 5 s');
  });
});
