// The stderr lines a class's children may log, on a manual clock whose wall
// reading NTP, or an operator, steps.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { ManualClock } from '@switchyard/clock/testing';
import { StderrBudget } from '../src/stderr-log.ts';

describe('the stderr budget of a class', () => {
  it('opens its next window 10 s on, not an hour later, when the wall clock was set back', async () => {
    const clock = new ManualClock();
    const budget = new StderrBudget(clock);
    const counts: number[] = [];
    const report = (dropped: number): void => void counts.push(dropped);
    let logged = 0;
    for (let i = 0; i < 101; i++) if (budget.take(report)) logged++;
    assert.equal(logged, 100, 'the window takes 100 lines and counts the rest');
    clock.stepWall(-3_600_000);
    await clock.advance(10_000);
    assert.equal(budget.take(report), true, 'a line of the next window is logged');
    assert.deepEqual(counts, [1], 'with the count of the one dropped');
  });
});
