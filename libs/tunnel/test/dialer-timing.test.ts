// A dial waits the ping interval and the ping timeout for the scheduler, in one timer. Node.js runs a timer set
// past 2^31 - 1 ms after 1 ms, so with a sum past that every dial failed at once and the runtime never joined,
// while each value alone looked valid. Only the runtime app's config bounded it; the dialer now refuses such
// settings when it is made, naming both, whoever builds it. A dial that starts goes to 127.0.0.1:1, on a manual
// clock that never runs its redial.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { ManualClock } from '@switchyard/clock/testing';
import { TIMER_DELAY_MS_MAX } from '@switchyard/service';
import { dialTunnel } from '../src/index.ts';
import { runtimeInfo, TOKEN } from './helpers.ts';

const dialerWith = (timing: { pingIntervalMs: number; pingTimeoutMs?: number }) =>
  dialTunnel({
    url: 'http://127.0.0.1:1',
    token: TOKEN,
    info: runtimeInfo('rt-timing'),
    handler: (_req, res) => res.end(),
    clock: new ManualClock(),
    ...timing,
  });

describe('tunnel dialer: ping interval and timeout together', () => {
  const refused = [
    { name: 'an interval whose timeout, as long again by default, takes the sum past', pingIntervalMs: 2 ** 30 },
    { name: 'a timeout past it on its own', pingIntervalMs: 5000, pingTimeoutMs: TIMER_DELAY_MS_MAX },
    { name: 'a sum one past it', pingIntervalMs: 2 ** 30, pingTimeoutMs: 2 ** 30 },
  ];
  for (const { name, ...timing } of refused) {
    it(`refuses ${name}, naming both values`, () => {
      const interval = timing.pingIntervalMs;
      const timeout = timing.pingTimeoutMs ?? interval;
      assert.throws(
        () => dialerWith(timing),
        (error: Error & { code?: string }) => {
          assert.equal(error.code, 'invalid_request');
          assert.match(
            error.message,
            new RegExp(
              `pingIntervalMs \\+ pingTimeoutMs \\(${interval} \\+ ${timeout}\\) must be at most ${TIMER_DELAY_MS_MAX}`,
            ),
          );
          return true;
        },
      );
    });
  }

  it('takes a sum of exactly what a timer holds, and the defaults', async () => {
    for (const timing of [
      { pingIntervalMs: 2 ** 30 - 1, pingTimeoutMs: 2 ** 30 },
      { pingIntervalMs: Math.floor(TIMER_DELAY_MS_MAX / 2) },
      { pingIntervalMs: 5000 },
    ]) {
      await dialerWith(timing).close();
    }
  });
});
