import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { ClusterIndex, REASONS, STAGES, schedule } from '@switchyard/scheduling';
import type { ScheduleDecision, ScheduleRequest } from '@switchyard/protocol';
import { request, rule, runtime, state } from './fixtures.ts';

const fleet = (): ClusterIndex =>
  ClusterIndex.from([
    state(runtime('r1', { idleWeight: { sandboxes: 0 } }), ['held'], [['held', 't1']]),
    state(runtime('r2', { metadata: { zone: 'eu' } })),
    state(runtime('r3', { available: false }), ['gone'], [['gone', 't1']]),
    state(runtime('r4', { classes: ['gpu'] })),
  ]);

interface Case {
  readonly name: string;
  readonly request: Partial<ScheduleRequest>;
  readonly pending?: ReadonlyMap<string, string>;
  /** `runtime/source`, or `stage/code` for an unschedulable decision. */
  readonly expect: string;
}

const outcome = (d: ScheduleDecision): string =>
  d.ok ? `${d.runtime}/${d.source}` : `${d.unschedulable.stage}/${d.unschedulable.code}`;

const cases: Case[] = [
  {
    name: 'a known thread goes straight to its runtime',
    request: { processId: 'held', threadId: 't1' },
    expect: 'r1/thread',
  },
  {
    name: 'a new thread of a held process goes to the holder even when saturated',
    request: { processId: 'held', threadId: 't2' },
    expect: 'r1/process',
  },
  {
    name: 'a thread on an unavailable runtime falls through to the pipeline',
    request: { processId: 'gone', threadId: 't1', sticky: false },
    expect: 'r2/pipeline',
  },
  {
    name: 'a sticky process on an unavailable runtime is unschedulable',
    request: { processId: 'gone', threadId: 't1' },
    expect: `${STAGES.availability}/${REASONS.noneAvailable}`,
  },
  {
    name: 'an excluded thread runtime is skipped and stickiness then fails',
    request: { processId: 'held', threadId: 't1', exclude: ['r1'] },
    expect: `${STAGES.processSticky}/${REASONS.holdersNotCandidates}`,
  },
  { name: 'a new process goes to the only open runtime', request: { processId: 'new' }, expect: 'r2/pipeline' },
  {
    name: 'a class nobody serves is unschedulable',
    request: { class: 'tpu' },
    expect: `${STAGES.class}/${REASONS.noRuntimeForClass}`,
  },
  {
    name: 'excluding every runtime of the class is unschedulable',
    request: { class: 'gpu', exclude: ['r4'] },
    expect: `${STAGES.exclude}/${REASONS.allExcluded}`,
  },
  {
    name: 'an affinity nobody meets is unschedulable',
    request: { affinity: [rule('zone', 'equal', 'us')] },
    expect: `${STAGES.affinity}/${REASONS.affinityMismatch}`,
  },
  {
    name: 'a holder failing the selector leaves nothing when sticky',
    request: { processId: 'held', processSelector: [rule('zone', 'equal', 'eu')] },
    expect: `${STAGES.processSelector}/${REASONS.selectorMismatch}`,
  },
  {
    name: 'a holder failing the selector is replaced when not sticky',
    request: { processId: 'held', sticky: false, processSelector: [rule('zone', 'equal', 'eu')] },
    expect: 'r2/pipeline',
  },
  {
    name: 'a pending placement counts as a holder',
    request: { processId: 'new' },
    pending: new Map([['new', 'r1']]),
    expect: 'r1/process',
  },
  {
    name: 'a pending placement the request excludes is ignored: the request never reached it',
    request: { processId: 'new', exclude: ['r1'] },
    pending: new Map([['new', 'r1']]),
    expect: 'r2/pipeline',
  },
  {
    name: 'a pending placement on an unknown runtime is ignored',
    request: { processId: 'new' },
    pending: new Map([['new', 'ghost']]),
    expect: 'r2/pipeline',
  },
];

describe('schedule', () => {
  for (const t of cases) {
    it(t.name, () => {
      const decision = schedule(fleet(), request(t.request), t.pending ? { pending: t.pending } : undefined);
      assert.equal(outcome(decision), t.expect, JSON.stringify(decision));
      if (!decision.ok) assert.match(decision.unschedulable.message, new RegExp(`^${decision.unschedulable.stage}: `));
    });
  }

  it('traces one step per stage with counts, and candidate ids only when asked to explain', () => {
    const plain = schedule(fleet(), request({ processId: 'new', threadId: 'tx' }));
    assert.deepEqual(
      plain.trace.map((s) => [s.stage, s.before, s.after, s.candidates]),
      [
        [STAGES.threadFastPath, 0, 0, undefined],
        [STAGES.class, 4, 3, undefined],
        [STAGES.exclude, 3, 3, undefined],
        [STAGES.processSticky, 3, 3, undefined],
        [STAGES.availability, 3, 1, undefined],
        [STAGES.affinity, 1, 1, undefined],
        [STAGES.processSelector, 1, 1, undefined],
        [STAGES.deterministicSelector, 1, 1, undefined],
      ],
    );
    const explained = schedule(fleet(), request({ processId: 'new', explain: true }));
    assert.deepEqual(
      explained.trace.map((s) => s.candidates),
      [['r1', 'r2', 'r3'], ['r1', 'r2', 'r3'], ['r1', 'r2', 'r3'], ['r2'], ['r2'], ['r2'], ['r2']],
    );
  });

  it('stops the trace at the stage that emptied the set', () => {
    const decision = schedule(fleet(), request({ affinity: [rule('zone', 'equal', 'us')] }));
    assert.equal(decision.trace.at(-1)?.stage, STAGES.affinity);
    assert.equal(decision.trace.at(-1)?.after, 0);
  });

  it('follows the index as it changes', () => {
    const index = fleet();
    index.apply({ op: 'runtime.available', runtimeId: 'r2', available: false });
    assert.equal(
      outcome(schedule(index, request({ processId: 'new' }))),
      `${STAGES.availability}/${REASONS.noneAvailable}`,
    );
    index.apply({ op: 'weight', runtimeId: 'r1', idleWeight: { sandboxes: 2 } });
    assert.equal(outcome(schedule(index, request({ processId: 'new' }))), 'r1/pipeline');
  });
});
