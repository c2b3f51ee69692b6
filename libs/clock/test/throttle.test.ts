import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { Throttle } from '../src/index.ts';
import { ManualClock } from '../src/testing.ts';

describe('Throttle', () => {
  it('lets the first event of a key pass, then one per interval, telling how many it held back', async () => {
    const clock = new ManualClock();
    const throttle = new Throttle(clock, 10_000);
    assert.equal(throttle.pass('a'), 0);
    assert.equal(throttle.pass('a'), undefined);
    assert.equal(throttle.pass('a'), undefined);
    assert.equal(throttle.pass('b'), 0, 'keys apart');
    await clock.advance(9_999);
    assert.equal(throttle.pass('a'), undefined);
    await clock.advance(1);
    assert.equal(throttle.pass('a'), 3, 'the three held back since the last that passed');
    assert.equal(throttle.pass('a'), undefined);
  });

  it('neither mutes a key when the wall clock steps back nor lets a flood through when it steps forward', async () => {
    const clock = new ManualClock();
    const throttle = new Throttle(clock, 10_000);
    assert.equal(throttle.pass('a'), 0);
    clock.stepWall(-3_600_000); // NTP, or an operator, sets the clock back an hour
    await clock.advance(10_000);
    assert.equal(throttle.pass('a'), 0, 'passes once the interval is up, as the monotonic clock counts it');
    clock.stepWall(3_600_000);
    assert.equal(throttle.pass('a'), undefined, 'a step forward is no interval gone by');
  });

  it('flushes the counts held back and forgets every key', () => {
    const throttle = new Throttle(new ManualClock(), 10_000);
    for (const key of ['a', 'a', 'a', 'b', 'c', 'c']) throttle.pass(key);
    assert.deepEqual(throttle.flush(), [
      ['a', 2],
      ['c', 1],
    ]);
    assert.equal(throttle.pass('a'), 0, 'passes at once after a flush');
    assert.deepEqual(throttle.flush(), []);
  });

  it('past keysMax keys forgets the one that passed longest ago, and still holds the others', async () => {
    const clock = new ManualClock();
    const throttle = new Throttle(clock, 10_000, 2);
    assert.equal(throttle.pass('a'), 0);
    await clock.advance(1);
    assert.equal(throttle.pass('b'), 0);
    await clock.advance(1);
    assert.equal(throttle.pass('c'), 0, 'a third key');
    assert.equal(throttle.pass('b'), undefined, 'b is still held');
    assert.equal(throttle.pass('c'), undefined, 'c is still held');
    assert.equal(throttle.pass('a'), 0, 'a, the oldest, was forgotten when c came');
    assert.equal(throttle.pass('b'), 0, 'and b, then the oldest, when a came back');
  });

  it('orders keys by when they last passed, not when they were first seen', async () => {
    const clock = new ManualClock();
    const throttle = new Throttle(clock, 10_000, 2);
    throttle.pass('a');
    await clock.advance(1);
    throttle.pass('b');
    await clock.advance(10_000);
    assert.equal(throttle.pass('a'), 0, 'a passes again, an interval on');
    assert.equal(throttle.pass('c'), 0);
    assert.equal(throttle.pass('a'), undefined, 'a, passed last but one, is still held');
  });
});
