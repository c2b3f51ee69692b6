// The pauses between an ioredis client's dials to its Redis, on a manual
// clock and a chosen random draw. How they pace a real gateway and a real
// metering sink against a real Redis is in the gateway's
// redis-reconnects.test.ts and the sandbox's metering-redis-failover.test.ts.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { ManualClock } from '@switchyard/clock/testing';
import { REDIS_HEALTHY_AFTER_MS, REDIS_REDIAL_MAX_MS, RedisBackoff } from '../src/redis-backoff.ts';

/** The highest draw Math.random can give: each pause is then its ceiling less one. */
const HIGHEST = 1 - Number.EPSILON;

/** A backoff on a fresh manual clock, its draws chosen by `random`. */
function backoff(random: () => number = () => HIGHEST): { clock: ManualClock; backoff: RedisBackoff } {
  const clock = new ManualClock();
  return { clock, backoff: new RedisBackoff(clock, random) };
}

describe('redis redial backoff', () => {
  it('raises its ceiling from 50 ms, doubling to 2 s, and stays there', () => {
    const { backoff: b } = backoff();
    const pauses = Array.from({ length: 30 }, () => b.nextDelayMs());
    assert.deepEqual(pauses.slice(0, 8), [49, 99, 199, 399, 799, 1599, 1999, 1999]);
    assert.ok(pauses.every((ms) => ms < REDIS_REDIAL_MAX_MS));
  });

  it('draws each pause anywhere from 0 to its ceiling (full jitter)', () => {
    const draws = [0, 0.5, 0.25, HIGHEST];
    const { backoff: b } = backoff(() => draws.shift()!);
    assert.deepEqual([b.nextDelayMs(), b.nextDelayMs(), b.nextDelayMs(), b.nextDelayMs()], [0, 50, 50, 399]);
  });

  const cases = [
    { served: 'a connection that served 2 s', servedMs: REDIS_HEALTHY_AFTER_MS, restarts: true },
    { served: 'a connection ready for a moment', servedMs: 10, restarts: false },
    { served: 'a connection ready for just under 2 s', servedMs: REDIS_HEALTHY_AFTER_MS - 1, restarts: false },
  ];
  for (const { served, servedMs, restarts } of cases) {
    it(`${restarts ? 'starts over' : 'goes on'} after ${served}`, async () => {
      const { clock, backoff: b } = backoff();
      for (let i = 0; i < 10; i++) b.nextDelayMs();
      b.ready();
      await clock.advance(servedMs);
      assert.equal(b.nextDelayMs(), restarts ? 49 : 1999);
    });
  }

  it('counts a connection served only once: the failed dials after it go on doubling', async () => {
    const { clock, backoff: b } = backoff();
    for (let i = 0; i < 10; i++) b.nextDelayMs();
    b.ready();
    await clock.advance(REDIS_HEALTHY_AFTER_MS);
    const pauses = [];
    for (let i = 0; i < 3; i++) {
      pauses.push(b.nextDelayMs());
      // Long after that connection went, each dial failing.
      await clock.advance(REDIS_HEALTHY_AFTER_MS);
    }
    assert.deepEqual(pauses, [49, 99, 199]);
  });
});
