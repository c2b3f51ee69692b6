// Trouble with an upstream (a refused gateway token, a scheduler down, Redis
// away) fails every request alike until it passes or an operator acts, so
// the gateway says so once per upstream and message per interval, with a
// count of what it held back, instead of once per request and replica.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { ManualClock } from '@switchyard/clock/testing';
import { THROTTLED_LOG_INTERVAL_MS, ThrottledLog } from '../src/throttled-log.ts';

interface Line {
  level: string;
  obj: object;
  msg?: string;
}

function recorder(): { lines: Line[]; logger: ConstructorParameters<typeof ThrottledLog>[0] } {
  const lines: Line[] = [];
  const at =
    (level: string) =>
    (obj: object, msg?: string): void =>
      void lines.push({ level, obj, ...(msg ? { msg } : {}) });
  return { lines, logger: { error: at('error'), warn: at('warn'), info: at('info'), debug: at('debug') } };
}

describe('ThrottledLog', () => {
  it('logs the first refusal of each upstream at once and later ones once per interval, with the count held back', async () => {
    const clock = new ManualClock();
    const { lines, logger } = recorder();
    const log = new ThrottledLog(logger, clock);
    for (let i = 0; i < 5; i++) log.error('http://s0:7070', 'refused');
    log.error('http://s1:7070', 'refused');
    assert.deepEqual(lines, [
      { level: 'error', obj: { upstream: 'http://s0:7070' }, msg: 'refused' },
      { level: 'error', obj: { upstream: 'http://s1:7070' }, msg: 'refused' },
    ]);
    await clock.advance(THROTTLED_LOG_INTERVAL_MS - 1);
    log.error('http://s0:7070', 'refused');
    assert.equal(lines.length, 2);
    await clock.advance(1);
    log.error('http://s0:7070', 'refused');
    assert.deepEqual(lines[2], { level: 'error', obj: { upstream: 'http://s0:7070', unlogged: 5 }, msg: 'refused' });
    await clock.advance(THROTTLED_LOG_INTERVAL_MS);
    log.error('http://s0:7070', 'refused');
    assert.deepEqual(lines[3], { level: 'error', obj: { upstream: 'http://s0:7070' }, msg: 'refused' });
  });

  it('keeps each message of an upstream apart, at its own level, with the latest fields', async () => {
    const clock = new ManualClock();
    const { lines, logger } = recorder();
    const log = new ThrottledLog(logger, clock);
    log.warn('http://s0:7070', 'scheduler unreachable', { err: 'ECONNREFUSED' });
    log.warn('http://s0:7070', 'scheduler unreachable', { err: 'ECONNRESET' });
    log.warn('http://s0:7070', 'scheduler answered unexpectedly', { status: 500 });
    log.error('http://s0:7070', 'refused');
    assert.deepEqual(lines, [
      { level: 'warn', obj: { upstream: 'http://s0:7070', err: 'ECONNREFUSED' }, msg: 'scheduler unreachable' },
      { level: 'warn', obj: { upstream: 'http://s0:7070', status: 500 }, msg: 'scheduler answered unexpectedly' },
      { level: 'error', obj: { upstream: 'http://s0:7070' }, msg: 'refused' },
    ]);
    await clock.advance(THROTTLED_LOG_INTERVAL_MS);
    log.warn('http://s0:7070', 'scheduler unreachable', { err: 'ETIMEDOUT' });
    assert.deepEqual(lines[3], {
      level: 'warn',
      obj: { upstream: 'http://s0:7070', err: 'ETIMEDOUT', unlogged: 1 },
      msg: 'scheduler unreachable',
    });
  });
});
