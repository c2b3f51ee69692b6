import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { ManualClock } from '@switchyard/clock/testing';
import { SwitchyardError } from '@switchyard/protocol';
import { ELECTION_DEFAULTS, LeaderElector, createMemoryLock, resolveTiming } from '@switchyard/election';
import type { ElectionTiming } from '@switchyard/election';

const rejected: Array<{ name: string; input: Partial<ElectionTiming>; message: RegExp }> = [
  {
    name: 'rejects a lease no longer than the renew deadline',
    input: { leaseDurationMs: 10_000 },
    message: /leaseDurationMs \(10000\) must be greater than renewDeadlineMs/,
  },
  {
    name: 'rejects a renew deadline within one jittered retry period',
    input: { renewDeadlineMs: 2_400 },
    message: /renewDeadlineMs \(2400\) must be greater than retryPeriodMs × jitterFactor/,
  },
  {
    name: 'rejects a retry period that jitter stretches past the deadline',
    input: { retryPeriodMs: 9_000 },
    message: /retryPeriodMs × jitterFactor \(9000 × 1.2\)/,
  },
  {
    name: 'rejects a zero retry period',
    input: { retryPeriodMs: 0 },
    message: /retryPeriodMs must be a finite number > 0/,
  },
  {
    name: 'rejects a negative lease duration',
    input: { leaseDurationMs: -1 },
    message: /leaseDurationMs must be a finite number > 0/,
  },
  {
    name: 'rejects a zero jitter factor',
    input: { jitterFactor: 0 },
    message: /jitterFactor must be a finite number > 0/,
  },
  {
    name: 'rejects an infinite renew deadline',
    input: { renewDeadlineMs: Infinity },
    message: /renewDeadlineMs must be a finite number/,
  },
  { name: 'rejects NaN', input: { leaseDurationMs: Number.NaN }, message: /leaseDurationMs must be a finite number/ },
  {
    // Node.js runs a longer timer after 1 ms: a candidate would try again at once, not after a retry period.
    name: 'rejects a jittered retry period longer than a timer holds',
    input: { leaseDurationMs: 2_100_000_000, renewDeadlineMs: 2_000_000_000, retryPeriodMs: 1_500_000_000 },
    message: /retryPeriodMs × \(1 \+ jitterFactor\) \(1500000000 × 2\.2\) must be at most 2147483647/,
  },
  {
    name: 'rejects an attempt timeout longer than the renew deadline',
    input: { attemptTimeoutMs: 10_001 },
    message: /attemptTimeoutMs \(10001\) must not exceed renewDeadlineMs/,
  },
];

const accepted: Array<{ name: string; input: Partial<ElectionTiming>; expected: ElectionTiming }> = [
  {
    name: 'fills the client-go defaults and times attempts out after one retry period',
    input: {},
    expected: { ...ELECTION_DEFAULTS, attemptTimeoutMs: 2_000 },
  },
  {
    name: 'accepts a tight but consistent setting',
    input: { leaseDurationMs: 3_000, renewDeadlineMs: 2_000, retryPeriodMs: 1_000, jitterFactor: 1.9 },
    expected: {
      leaseDurationMs: 3_000,
      renewDeadlineMs: 2_000,
      retryPeriodMs: 1_000,
      jitterFactor: 1.9,
      attemptTimeoutMs: 1_000,
    },
  },
  {
    name: 'keeps an explicit attempt timeout',
    input: { attemptTimeoutMs: 500 },
    expected: { ...ELECTION_DEFAULTS, attemptTimeoutMs: 500 },
  },
];

describe('election settings', () => {
  for (const c of rejected) {
    it(c.name, () => {
      assert.throws(
        () => resolveTiming(c.input),
        (error: unknown) =>
          error instanceof SwitchyardError && error.code === 'invalid_request' && c.message.test(error.message),
      );
    });
  }
  for (const c of accepted) {
    it(c.name, () => assert.deepEqual(resolveTiming(c.input), c.expected));
  }

  it('are validated when an elector is constructed', () => {
    const base = { lock: createMemoryLock(), identity: 'a@x', clock: new ManualClock(0) };
    assert.throws(
      () => new LeaderElector({ ...base, leaseDurationMs: 5_000, renewDeadlineMs: 5_000 }),
      /must be greater/,
    );
    assert.throws(() => new LeaderElector({ ...base, identity: '' }), /identity must be non-empty/);
    assert.doesNotThrow(() => new LeaderElector(base));
  });
});
