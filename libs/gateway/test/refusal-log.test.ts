// A refused gateway token fails every request alike until an operator acts,
// so the gateway says so once per upstream per interval, with a count of
// what it held back, instead of once per request and replica.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { ManualClock } from '@switchyard/clock/testing';
import { REFUSAL_LOG_INTERVAL_MS, RefusalLog } from '../src/refusal-log.ts';

function recorder(): { lines: { obj: object; msg?: string }[]; logger: ConstructorParameters<typeof RefusalLog>[0] } {
  const lines: { obj: object; msg?: string }[] = [];
  const error = (obj: object, msg?: string): void => void lines.push({ obj, ...(msg ? { msg } : {}) });
  return { lines, logger: { error, warn: () => {}, info: () => {}, debug: () => {} } };
}

describe('RefusalLog', () => {
  it('logs the first refusal of each upstream at once and later ones once per interval, with the count held back', async () => {
    const clock = new ManualClock();
    const { lines, logger } = recorder();
    const log = new RefusalLog(logger, clock);
    for (let i = 0; i < 5; i++) log.refused('http://s0:7070', 'refused');
    log.refused('http://s1:7070', 'refused');
    assert.deepEqual(lines, [
      { obj: { upstream: 'http://s0:7070' }, msg: 'refused' },
      { obj: { upstream: 'http://s1:7070' }, msg: 'refused' },
    ]);
    await clock.advance(REFUSAL_LOG_INTERVAL_MS - 1);
    log.refused('http://s0:7070', 'refused');
    assert.equal(lines.length, 2);
    await clock.advance(1);
    log.refused('http://s0:7070', 'refused');
    assert.deepEqual(lines[2], { obj: { upstream: 'http://s0:7070', unlogged: 5 }, msg: 'refused' });
    await clock.advance(REFUSAL_LOG_INTERVAL_MS);
    log.refused('http://s0:7070', 'refused');
    assert.deepEqual(lines[3], { obj: { upstream: 'http://s0:7070' }, msg: 'refused' });
  });
});
