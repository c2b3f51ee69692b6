import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { sleep } from '@switchyard/clock';
import { ManualClock } from '@switchyard/clock/testing';

describe('ManualClock', () => {
  it('fires timers in due order and only when time passes them', async () => {
    const clock = new ManualClock(0);
    const fired: string[] = [];
    clock.setTimeout(() => fired.push('b@20'), 20);
    clock.setTimeout(() => fired.push('a@10'), 10);
    clock.setTimeout(() => fired.push('c@20'), 20);
    await clock.advance(15);
    assert.deepEqual(fired, ['a@10']);
    await clock.advance(5);
    assert.deepEqual(fired, ['a@10', 'b@20', 'c@20']);
    assert.equal(clock.now(), 20);
  });

  it('does not fire a cancelled timer', async () => {
    const clock = new ManualClock(0);
    let fired = false;
    clock.setTimeout(() => (fired = true), 5).cancel();
    await clock.advance(10);
    assert.equal(fired, false);
    assert.equal(clock.pendingTimers, 0);
  });

  it('tells how long until the next timer, past cancelled ones, and nothing once none is left', async () => {
    const clock = new ManualClock(0);
    clock.setTimeout(() => {}, 5).cancel();
    clock.setTimeout(() => {}, 30);
    clock.setTimeout(() => {}, 12);
    assert.equal(clock.nextDueInMs, 12);
    await clock.advance(clock.nextDueInMs!);
    assert.equal(clock.pendingTimers, 1);
    assert.equal(clock.nextDueInMs, 18);
    clock.standStill(40);
    assert.equal(clock.nextDueInMs, 0, 'overdue');
    await clock.advance(0);
    assert.equal(clock.nextDueInMs, undefined);
  });

  it('runs timers scheduled by timers within the same advance', async () => {
    const clock = new ManualClock(0);
    const at: number[] = [];
    const tick = (): void => {
      at.push(clock.now());
      if (at.length < 3) clock.setTimeout(tick, 10);
    };
    clock.setTimeout(tick, 10);
    await clock.advance(100);
    assert.deepEqual(at, [10, 20, 30]);
  });

  it('steps the wall clock alone: monotonic time and timers stay where they were', async () => {
    const clock = new ManualClock(1_000);
    let fired = false;
    clock.setTimeout(() => (fired = true), 50);
    clock.stepWall(60_000);
    assert.equal(clock.now(), 61_000);
    assert.equal(clock.monotonicNow(), 1_000);
    assert.equal(fired, false);
    clock.stepWall(-120_000);
    await clock.advance(50);
    assert.equal(fired, true);
    assert.equal(clock.now(), -58_950);
    assert.equal(clock.monotonicNow(), 1_050);
  });

  it('stands still: time moves on, and timers that fell due meanwhile fire late, in due order, at the next advance', async () => {
    const clock = new ManualClock(0);
    const fired: string[] = [];
    clock.setTimeout(() => fired.push(`b@${clock.monotonicNow()}`), 20);
    clock.setTimeout(() => fired.push(`a@${clock.monotonicNow()}`), 10);
    clock.setTimeout(() => fired.push(`c@${clock.monotonicNow()}`), 50);
    clock.standStill(30);
    assert.deepEqual(fired, [], 'a process standing still runs nothing');
    assert.equal(clock.monotonicNow(), 30);
    await clock.advance(0);
    assert.deepEqual(fired, ['a@30', 'b@30']);
    await clock.advance(20);
    assert.deepEqual(fired, ['a@30', 'b@30', 'c@50']);
  });

  it('sleep resolves on time and rejects when aborted', async () => {
    const clock = new ManualClock(0);
    let done = false;
    const slept = sleep(clock, 50).then(() => (done = true));
    await clock.advance(49);
    assert.equal(done, false);
    await clock.advance(1);
    await slept;
    assert.equal(done, true);

    const controller = new AbortController();
    const aborted = sleep(clock, 50, controller.signal);
    controller.abort(new Error('stop'));
    await assert.rejects(aborted, /stop/);
  });
});
