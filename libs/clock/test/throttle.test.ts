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

  it('starts over past keysMax keys', () => {
    const throttle = new Throttle(new ManualClock(), 10_000, 2);
    throttle.pass('a');
    throttle.pass('b');
    assert.equal(throttle.pass('a'), undefined);
    assert.equal(throttle.pass('c'), 0, 'a third key');
    assert.equal(throttle.pass('a'), 0, 'a was forgotten with b when c came');
  });
});
