import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { Heartbeat, type Timer } from '../src/index.ts';
import { ManualClock } from '../src/testing.ts';

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
  /** The scripted answers still to come: the peer's, not the heartbeat's timers. */
  const lateAnswers: Timer[] = [];
  const heartbeat = new Heartbeat({
    clock,
    intervalMs: 300,
    timeoutMs: 300,
    probe: () => {
      const answer = answers[Math.min(round++, answers.length - 1)]!;
      if (answer.kind === 'ok') return Promise.resolve(answer.rttMs);
      if (answer.kind === 'fail') return Promise.reject(new Error('GOAWAY'));
      if (answer.kind === 'late')
        return new Promise((r) => lateAnswers.push(clock.setTimeout(() => r(1), answer.afterMs)));
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
  for (const answer of lateAnswers) answer.cancel();
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
      // Node runs due timers before it reads sockets: the answer is read in the turn the timeout falls due.
      name: 'an answer that arrives as the timeout falls due keeps the peer',
      answers: [{ kind: 'late', afterMs: 300 }],
      rtts: [1],
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

/**
 * A heartbeat (interval 300, timeout 300) whose first probe goes out at 300
 * and is answered only when the test calls `answer` (as the I/O read after a
 * blocked event loop is).
 */
function pausedProcess(): {
  clock: ManualClock;
  answer(): void;
  readonly rtts: number[];
  readonly dead: { atMs: number; reason: string; cause: string } | undefined;
  stop(): void;
} {
  const clock = new ManualClock(0);
  const rtts: number[] = [];
  let dead: { atMs: number; reason: string; cause: string } | undefined;
  let answer = (): void => {};
  const heartbeat = new Heartbeat({
    clock,
    intervalMs: 300,
    timeoutMs: 300,
    probe: () => new Promise<number>((resolve) => (answer = () => resolve(5))),
    onRtt: (rttMs) => rtts.push(rttMs),
    onDead: (reason, cause) => (dead = { atMs: clock.monotonicNow(), reason, cause }),
  });
  return {
    clock,
    answer: () => answer(),
    rtts,
    get dead() {
      return dead;
    },
    stop: () => heartbeat.stop(),
  };
}

describe('heartbeat of a process that stood still', () => {
  it('keeps a peer whose answer is read when the process comes back past the timeout', async () => {
    const hb = pausedProcess();
    await hb.clock.advance(300);
    // The loop is blocked from the probe to 400 ms past its timeout; on its return the timers run before I/O.
    hb.clock.standStill(700);
    await hb.clock.advance(0);
    hb.answer();
    await hb.clock.advance(0);
    assert.equal(hb.dead, undefined, 'the peer answered; this process was not looking');
    assert.deepEqual(hb.rtts, [5]);
    hb.stop();
  });

  it('declares a peer still silent one timeout after the process came back', async () => {
    const hb = pausedProcess();
    await hb.clock.advance(300);
    hb.clock.standStill(700);
    await hb.clock.advance(299);
    assert.equal(hb.dead, undefined);
    await hb.clock.advance(1);
    assert.deepEqual(hb.dead, { atMs: 1300, reason: 'no ping answer within 300 ms', cause: 'unanswered' });
    hb.stop();
  });

  it('convicts on time when the timer was late by no more than a quarter of the timeout', async () => {
    const hb = pausedProcess();
    await hb.clock.advance(300);
    hb.clock.standStill(375);
    await hb.clock.advance(0);
    assert.equal(hb.dead?.atMs, 675);
    hb.stop();
  });

  it('puts a verdict off at most three times, however often the process stands still', async () => {
    const hb = pausedProcess();
    await hb.clock.advance(300);
    for (let i = 0; i < 3; i++) {
      hb.clock.standStill(700);
      await hb.clock.advance(0);
      assert.equal(hb.dead, undefined, `put off ${i + 1}`);
    }
    hb.clock.standStill(700);
    await hb.clock.advance(0);
    assert.equal(hb.dead?.atMs, 300 + 4 * 700);
    assert.equal(hb.clock.pendingTimers, 0);
  });
});
