import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { ManualClock } from '@switchyard/clock/testing';
import { Heartbeat } from '../src/heartbeat.ts';
import { backoffDelayMs } from '../src/index.ts';
import { PEER_NOTICE_WAIT_MAX_MS, livenessHeaderValue, noticeDeadline, parseLiveness } from '../src/liveness.ts';

type Answer = { kind: 'ok'; rttMs: number } | { kind: 'fail' } | { kind: 'silent' } | { kind: 'late'; afterMs: number };

/** Runs a heartbeat (interval 300, timeout 300) whose probes answer as scripted; returns what it reported by `untilMs`. */
async function run(
  answers: Answer[],
  untilMs: number,
): Promise<{ rtts: number[]; deadAtMs?: number; reason?: string; cause?: string }> {
  const clock = new ManualClock(0);
  const rtts: number[] = [];
  const out: { rtts: number[]; deadAtMs?: number; reason?: string; cause?: string } = { rtts };
  let round = 0;
  const heartbeat = new Heartbeat({
    clock,
    intervalMs: 300,
    timeoutMs: 300,
    probe: () => {
      const answer = answers[Math.min(round++, answers.length - 1)]!;
      if (answer.kind === 'ok') return Promise.resolve(answer.rttMs);
      if (answer.kind === 'fail') return Promise.reject(new Error('GOAWAY'));
      if (answer.kind === 'late') return new Promise((r) => clock.setTimeout(() => r(1), answer.afterMs));
      return new Promise(() => {});
    },
    onRtt: (rttMs) => rtts.push(rttMs),
    onDead: (reason, cause) => {
      out.deadAtMs = clock.now();
      out.reason = reason;
      out.cause = cause;
    },
  });
  await clock.advance(untilMs);
  heartbeat.stop();
  assert.equal(clock.pendingTimers, 0, 'a stopped heartbeat leaves no timer behind');
  return out;
}

describe('heartbeat', () => {
  const cases: { name: string; answers: Answer[]; rtts: number[]; deadAtMs?: number; reason?: RegExp }[] = [
    {
      name: 'a peer that answers stays alive and reports each rtt, one probe per interval',
      answers: [{ kind: 'ok', rttMs: 2 }],
      rtts: [2, 2, 2],
    },
    {
      name: 'a silent peer is declared dead one timeout after the first probe',
      answers: [{ kind: 'silent' }],
      rtts: [],
      deadAtMs: 600,
      reason: /no ping answer/,
    },
    {
      name: 'a peer that goes silent later is dead within interval plus timeout',
      answers: [{ kind: 'ok', rttMs: 1 }, { kind: 'silent' }],
      rtts: [1],
      deadAtMs: 900,
      reason: /no ping answer/,
    },
    {
      name: 'a failed probe is death at once',
      answers: [{ kind: 'fail' }],
      rtts: [],
      deadAtMs: 300,
      reason: /ping failed: GOAWAY/,
    },
    {
      name: 'an answer after the timeout does not revive the peer',
      answers: [{ kind: 'late', afterMs: 400 }],
      rtts: [],
      deadAtMs: 600,
      reason: /no ping answer/,
    },
  ];
  for (const c of cases) {
    it(c.name, async () => {
      const result = await run(c.answers, 1000 + (c.deadAtMs ?? 0));
      assert.deepEqual(result.rtts, c.rtts);
      assert.equal(result.deadAtMs, c.deadAtMs);
      if (c.deadAtMs !== undefined) {
        assert.match(result.reason ?? '', c.reason!);
        // A peer that failed a probe told us it is gone; only one that never answered may not know yet.
        assert.equal(result.cause, /no ping answer/.test(result.reason ?? '') ? 'unanswered' : 'failed');
      }
    });
  }
});

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
