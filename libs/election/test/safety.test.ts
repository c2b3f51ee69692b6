// Property: over random fault schedules, never two leaders at once. Three
// electors share one MemoryLeaseStore and one ManualClock; every lock call
// draws a fault (failure before or after the write, conflict, hang) and a
// delay from the schedule. The invariant is checked at the exact instant any
// leadership starts, whenever a lease write lands, and after every clock step.
// Checked by mutation: letting a claim outlive renewDeadline by 3 s (so it
// overlaps the lease others see) makes this property fail. Electors are also
// told at random that a term exists (`termExists`, as when a follower fences a
// leader off): terms must still rise with every leadership.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { sleep } from '@switchyard/clock';
import { ManualClock } from '@switchyard/clock/testing';
import { LeaderElector, LeaseConflictError, MemoryLeaseStore, createMemoryLock } from '@switchyard/election';
import type { MemoryLockCall } from '@switchyard/election';

const STEP_MS = 500;
const RUN_MS = 60_000;
const IDS = ['r0', 'r1', 'r2'] as const;

type Fault = 'fail-request' | 'fail-response' | 'conflict' | 'hang' | 'slow';

/** A time window in which every lock call of one elector suffers one fault: an outage, a partition, a storm. */
const outage = fc.record({
  startMs: fc.integer({ min: 0, max: RUN_MS }),
  durationMs: fc.integer({ min: 500, max: 20_000 }),
  fault: fc.constantFrom<Fault>('fail-request', 'fail-response', 'conflict', 'hang', 'slow'),
});
const electorPlan = fc.record({
  outages: fc.array(outage, { maxLength: 4 }),
  /** Per-call noise outside outages: this share of calls fails at random, every call gets a small random delay. */
  noiseRate: fc.constantFrom(0, 0.05, 0.2),
  seed: fc.integer({ min: 1, max: 2 ** 31 - 1 }),
  stopAtMs: fc.option(fc.integer({ min: 0, max: RUN_MS }), { nil: undefined }),
  /** When this elector is told a term exists (a follower fenced it off), relative to the last term started. */
  told: fc.array(fc.record({ atMs: fc.integer({ min: 0, max: RUN_MS }), above: fc.integer({ min: -2, max: 3 }) }), {
    maxLength: 3,
  }),
});
type ElectorPlan = typeof electorPlan extends fc.Arbitrary<infer T> ? T : never;

/** Small seeded PRNG for jitter, so a failing schedule replays exactly. */
function prng(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = Math.imul(s ^ (s >>> 15), 1 | s);
    t ^= t + Math.imul(t ^ (t >>> 7), 61 | t);
    return ((t ^ (t >>> 14)) >>> 0) / 2 ** 32;
  };
}

const totals = { leaderships: 0, handovers: 0, lostRenewals: 0, toldWhileLeading: 0, runs: 0 };

async function runSchedule(plans: readonly ElectorPlan[]): Promise<void> {
  const clock = new ManualClock(0);
  const store = new MemoryLeaseStore();
  const electors: LeaderElector[] = [];
  const violations: string[] = [];
  const stopping = new Set<number>();
  let lastTerm = -1;
  let previous: string | undefined;

  IDS.forEach((id, index) => {
    const plan = plans[index]!;
    const noise = prng(plan.seed ^ 0x5bd1e995);
    const intercept = async ({ op, phase }: MemoryLockCall): Promise<void> => {
      const now = clock.now();
      // A write of ours just landed: a takeover or renewal while someone else still leads is the bug we hunt.
      if (phase === 'response' && op !== 'get' && electors.some((e, i) => i !== index && e.isLeader)) {
        violations.push(`${id} wrote the lease at ${now} while another elector led`);
      }
      const active = plan.outages.find((o) => now >= o.startMs && now < o.startMs + o.durationMs);
      const fault: Fault | undefined = active?.fault ?? (noise() < plan.noiseRate ? 'fail-request' : undefined);
      await sleep(clock, fault === 'slow' ? 1_500 : Math.floor(noise() * 300));
      if (phase === 'request' && fault === 'hang') await new Promise<void>(() => {});
      if (phase === 'request' && fault === 'conflict') throw new LeaseConflictError('conflict', 'injected');
      if (phase === 'request' && fault === 'fail-request') throw new Error('injected 500');
      if (phase === 'response' && fault === 'fail-response') throw new Error('reply lost');
    };
    const elector = new LeaderElector({
      lock: createMemoryLock(store, { intercept }),
      identity: id,
      clock,
      random: prng(plan.seed),
      onStartedLeading: ({ term }) => {
        totals.leaderships++;
        if (previous !== undefined && previous !== id) totals.handovers++;
        previous = id;
        const others = electors.filter((e) => e !== elector && e.isLeader);
        if (others.length > 0) violations.push(`${id} started term ${term} at ${clock.now()} while another led`);
        if (term <= lastTerm) violations.push(`${id} started term ${term} at ${clock.now()} after term ${lastTerm}`);
        lastTerm = term;
      },
      onStoppedLeading: () => {
        if (!stopping.has(index)) totals.lostRenewals++;
      },
    });
    electors.push(elector);
  });

  for (const e of electors) e.start();
  for (let t = 0; t < RUN_MS; t += STEP_MS) {
    await clock.advance(STEP_MS);
    const leaders = electors.filter((e) => e.isLeader).length;
    if (leaders > 1) violations.push(`${leaders} leaders at ${clock.now()}`);
    plans.forEach((plan, i) => {
      for (const { atMs, above } of plan.told) {
        if (atMs > clock.now() - STEP_MS && atMs <= clock.now()) {
          const term = Math.max(0, lastTerm + above);
          if (electors[i]!.isLeader && electors[i]!.term! <= term) totals.toldWhileLeading++;
          electors[i]!.termExists(term);
        }
      }
      if (plan.stopAtMs !== undefined && plan.stopAtMs <= clock.now()) {
        stopping.add(i);
        void electors[i]!.stop();
      }
    });
  }
  // A release stuck in a hung call gives up after attemptTimeoutMs of clock time.
  let stopped = false;
  electors.forEach((_, i) => stopping.add(i));
  const allStopped = Promise.all(electors.map((e) => e.stop())).then(() => (stopped = true));
  for (let t = 0; !stopped && t < 10_000; t += STEP_MS) await clock.advance(STEP_MS);
  await allStopped;
  totals.runs++;
  assert.deepEqual(violations, []);
}

describe('election safety under random faults', () => {
  it('never lets two electors lead at once, over 200 random fault schedules', async () => {
    await fc.assert(
      fc.asyncProperty(fc.tuple(electorPlan, electorPlan, electorPlan), (plans) => runSchedule(plans)),
      { numRuns: 200 },
    );
    // The property must have exercised real handovers, or it proves nothing.
    assert.equal(totals.runs, 200);
    const seen = JSON.stringify(totals);
    assert.ok(totals.leaderships > 200, `too few leaderships: ${seen}`);
    assert.ok(totals.handovers > 50, `too few handovers between electors: ${seen}`);
    assert.ok(totals.lostRenewals > 50, `too few step-downs on failed renewals: ${seen}`);
    assert.ok(totals.toldWhileLeading > 20, `too few leaders told of a term at or above theirs: ${seen}`);
  });
});
