import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { backoffDelayMs } from '../src/index.ts';
import { PEER_NOTICE_WAIT_MAX_MS, livenessHeaderValue, noticeDeadline, parseLiveness } from '../src/liveness.ts';

describe('reconnect backoff', () => {
  const cases: { name: string; attempt: number; random: number; expectedMs: number }[] = [
    { name: 'the first retry waits the initial delay', attempt: 0, random: 0, expectedMs: 250 },
    { name: 'each retry doubles the delay', attempt: 3, random: 0, expectedMs: 2000 },
    { name: 'the delay is capped at 30 s', attempt: 40, random: 0, expectedMs: 30_000 },
    { name: 'jitter shortens a delay by at most its fraction', attempt: 2, random: 1, expectedMs: 800 },
    { name: 'half jitter takes off half the fraction', attempt: 40, random: 0.5, expectedMs: 27_000 },
  ];
  for (const c of cases) {
    it(c.name, () => {
      assert.equal(
        backoffDelayMs(c.attempt, {}, () => c.random),
        c.expectedMs,
      );
    });
  }
});

describe('announced liveness timing (X-Runtime-Liveness)', () => {
  it('reads what a dialer writes', () => {
    const liveness = { pingIntervalMs: 5000, pingTimeoutMs: 2500 };
    assert.deepEqual(parseLiveness(livenessHeaderValue(liveness)), liveness);
  });
  const ignored: { name: string; value: string | string[] | undefined }[] = [
    { name: 'absent (a runtime from before the header)', value: undefined },
    { name: 'repeated', value: ['ping-interval-ms=1', 'ping-timeout-ms=1'] },
    { name: 'missing a field', value: 'ping-interval-ms=5000' },
    { name: 'zero', value: 'ping-interval-ms=0, ping-timeout-ms=5000' },
    { name: 'not a number', value: 'ping-interval-ms=5s, ping-timeout-ms=5000' },
    { name: 'past ten minutes', value: 'ping-interval-ms=600001, ping-timeout-ms=5000' },
  ];
  for (const c of ignored) it(`is ignored when ${c.name}`, () => assert.equal(parseLiveness(c.value), undefined));

  it('bounds how long past its last ping a runtime is taken to need to notice', () => {
    assert.equal(noticeDeadline(1000, { pingIntervalMs: 300, pingTimeoutMs: 200 }), 1500);
    assert.equal(
      noticeDeadline(1000, { pingIntervalMs: 600_000, pingTimeoutMs: 600_000 }),
      1000 + PEER_NOTICE_WAIT_MAX_MS,
    );
  });
});
