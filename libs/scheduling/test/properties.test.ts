import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import {
  ClusterIndex,
  affinityFilter,
  applyOps,
  availabilityFilter,
  deterministicSelector,
  diffStates,
  excludeFilter,
  mergeParts,
  processSelectorFilter,
  processStickyFilter,
  schedule,
  toCandidate,
} from '@switchyard/scheduling';
import type { Candidate, FilterContext, ScheduleOptions } from '@switchyard/scheduling';
import type { ClusterOp, Rule, Runtime, RuntimeState, ScheduleRequest } from '@switchyard/protocol';
import { runtime, state } from './fixtures.ts';

// Small alphabets so generated snapshots overlap: shared processes, duplicate
// runtime reports, ties in weight.
const RUNTIME_IDS = ['r0', 'r1', 'r2', 'r3', 'r4', 'r5'];
const CLASSES = ['a', 'b', 'c'];
const PROCESSES = ['p0', 'p1', 'p2', 'p3', 'p4', 'p5'];
const THREADS = ['t0', 't1', 't2'];
const VERSIONS = ['1.0.0', '1.2.0', '2.0.0-rc.1', '2.0.0', 'bad'];

const runtimeArb = (id: fc.Arbitrary<string>): fc.Arbitrary<Runtime> =>
  fc.record({
    id,
    classes: fc.uniqueArray(fc.constantFrom(...CLASSES), { minLength: 1 }),
    metadata: fc.dictionary(fc.constantFrom('zone', 'image'), fc.constantFrom('eu', 'us', '1.0.0', '3.1.0')),
    version: fc.constantFrom(...VERSIONS),
    idleWeight: fc.dictionary(fc.constantFrom('s', 'm'), fc.integer({ min: 0, max: 5 })),
    available: fc.boolean(),
    owner: fc.constantFrom('replica-a', 'replica-b'),
    generation: fc.integer({ min: 0, max: 2 }),
  });

const stateArb: fc.Arbitrary<RuntimeState> = fc.record({
  runtime: runtimeArb(fc.constantFrom(...RUNTIME_IDS)),
  processes: fc.uniqueArray(fc.constantFrom(...PROCESSES), { maxLength: 4 }),
  threads: fc.uniqueArray(fc.record({ process: fc.constantFrom(...PROCESSES), thread: fc.constantFrom(...THREADS) }), {
    maxLength: 6,
    selector: (t) => `${t.process}/${t.thread}`,
  }),
});

const snapshotArb = fc.array(stateArb, { maxLength: 10 });

const ruleArb: fc.Arbitrary<Rule> = fc.oneof(
  fc.record({
    key: fc.constantFrom('zone', 'version', 'image'),
    op: fc.constantFrom('equal', 'not_equal' as const),
    value: fc.constantFrom('eu', 'us', '2.0.0'),
  }),
  fc.record({
    key: fc.constantFrom('zone', 'version', 'image'),
    op: fc.constantFrom('exists', 'latest_version' as const),
  }),
);

const requestArb: fc.Arbitrary<ScheduleRequest> = fc.record(
  {
    class: fc.constantFrom(...CLASSES, 'x'),
    processId: fc.constantFrom(...PROCESSES, 'n0', 'n1', 'n2', 'n3'),
    threadId: fc.constantFrom(...THREADS),
    sticky: fc.boolean(),
    processSelector: fc.array(ruleArb, { maxLength: 2 }),
    affinity: fc.array(ruleArb, { maxLength: 2 }),
    loadBalance: fc.record(
      {
        replicasLimit: fc.integer({ min: 1, max: 4 }),
        sortBy: fc.constantFrom('weight', '-weight', 's', '-m'),
        chooseWeightBy: fc.constantFrom('', 'weight', 'm'),
      },
      { requiredKeys: [] },
    ),
    exclude: fc.uniqueArray(fc.constantFrom(...RUNTIME_IDS), { maxLength: 2 }),
    explain: fc.boolean(),
  },
  { requiredKeys: ['class', 'processId', 'sticky'] },
);

/** Deterministic Fisher–Yates driven by a seed, so failures replay. */
function shuffled<T>(items: readonly T[], seed: number): T[] {
  const out = [...items];
  let s = seed >>> 0 || 1;
  for (let i = out.length - 1; i > 0; i--) {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    const j = s % (i + 1);
    [out[i], out[j]] = [out[j]!, out[i]!];
  }
  return out;
}

/** The same facts with every list and record in another order. */
function reordered(states: readonly RuntimeState[], seed: number): RuntimeState[] {
  return shuffled(states, seed).map((s, i) => ({
    runtime: {
      ...s.runtime,
      classes: shuffled(s.runtime.classes, seed + i),
      metadata: Object.fromEntries(Object.entries(s.runtime.metadata).reverse()),
      idleWeight: Object.fromEntries(Object.entries(s.runtime.idleWeight).reverse()),
    },
    processes: shuffled(s.processes, seed + i + 1),
    threads: shuffled(s.threads, seed + i + 2),
  }));
}

const opArb: fc.Arbitrary<ClusterOp> = fc.oneof(
  runtimeArb(fc.constantFrom(...RUNTIME_IDS)).map((r) => ({ op: 'runtime.upsert' as const, runtime: r })),
  fc.constantFrom(...RUNTIME_IDS).map((runtimeId) => ({ op: 'runtime.remove' as const, runtimeId })),
  fc.record({
    op: fc.constant('runtime.available' as const),
    runtimeId: fc.constantFrom(...RUNTIME_IDS),
    available: fc.boolean(),
  }),
  fc.record({
    op: fc.constantFrom('process.add' as const, 'process.remove' as const),
    runtimeId: fc.constantFrom(...RUNTIME_IDS),
    process: fc.constantFrom(...PROCESSES),
  }),
  fc.record({
    op: fc.constantFrom('thread.add' as const, 'thread.remove' as const),
    runtimeId: fc.constantFrom(...RUNTIME_IDS),
    process: fc.constantFrom(...PROCESSES),
    thread: fc.constantFrom(...THREADS),
  }),
  fc.record({
    op: fc.constant('weight' as const),
    runtimeId: fc.constantFrom(...RUNTIME_IDS),
    idleWeight: fc.dictionary(fc.constantFrom('s', 'm'), fc.nat(5)),
  }),
  fc.record({
    op: fc.constant('metadata' as const),
    runtimeId: fc.constantFrom(...RUNTIME_IDS),
    metadata: fc.dictionary(fc.constantFrom('zone'), fc.constantFrom('eu', 'us')),
  }),
);

/**
 * The pipeline composed by hand from the exported stages, on fresh
 * candidates and without the index's precomputed views: what `schedule`
 * must answer (outside the thread fast path).
 */
function reference(index: ClusterIndex, req: ScheduleRequest): string {
  let candidates: readonly Candidate[] = index.runtimesOfClass(req.class).map(toCandidate);
  if (candidates.length === 0) return 'unschedulable:no_runtime_for_class';
  const context: FilterContext = { request: req, holders: index.holdersOf(req.processId) };
  for (const filter of [
    excludeFilter,
    processStickyFilter,
    availabilityFilter,
    affinityFilter,
    processSelectorFilter,
  ]) {
    const status = filter.filter(candidates, context);
    if (!status.ok) return `unschedulable:${status.code}`;
    candidates = status.candidates;
  }
  const picked = deterministicSelector.select(candidates, context);
  return picked.ok ? picked.candidate.id : `unschedulable:${picked.code}`;
}

describe('scheduling properties', () => {
  it('schedules as the plain composition of the exported stages, as the index changes', () => {
    const steps = fc.array(fc.tuple(fc.option(opArb), requestArb), { minLength: 50, maxLength: 50 });
    fc.assert(
      fc.property(snapshotArb, steps, (states, plan) => {
        const index = ClusterIndex.from(states);
        for (const [op, { threadId: _, ...req }] of plan) {
          if (op !== null) index.apply(op);
          const decision = schedule(index, req as ScheduleRequest, {} satisfies ScheduleOptions);
          const got = decision.ok ? decision.runtime : `unschedulable:${decision.unschedulable.code}`;
          assert.equal(got, reference(index, req as ScheduleRequest));
        }
      }),
      { numRuns: 100 },
    );
  });

  it('gives identical answers for 10,000 requests whatever the insertion or merge order', () => {
    let requests = 0;
    const outcomes = new Set<string>();
    fc.assert(
      fc.property(
        snapshotArb,
        fc.integer(),
        fc.array(fc.integer({ min: 0, max: 2 }), { minLength: 10, maxLength: 10 }),
        fc.array(requestArb, { minLength: 200, maxLength: 200 }),
        (states, seed, partOf, reqs) => {
          const parts: RuntimeState[][] = [[], [], []];
          states.forEach((s, i) => parts[partOf[i]!]!.push(s));
          const indexes = [
            ClusterIndex.from(states),
            ClusterIndex.from(reordered(states, seed)),
            ClusterIndex.from(mergeParts(parts)),
            ClusterIndex.from(mergeParts(shuffled(parts, seed).map((p) => reordered(p, seed)))),
          ];
          const canonical = indexes[0]!.toStates();
          for (const index of indexes) assert.deepEqual(index.toStates(), canonical);
          for (const req of reqs) {
            const expected = schedule(indexes[0]!, req);
            for (const index of indexes.slice(1)) assert.deepEqual(schedule(index, req), expected);
            outcomes.add(expected.ok ? expected.source : 'unschedulable');
            requests++;
          }
        },
      ),
      { numRuns: 50 },
    );
    assert.equal(requests, 10_000);
    // The comparison covers every kind of answer, not only rejections.
    assert.deepEqual([...outcomes].sort(), ['pipeline', 'process', 'thread', 'unschedulable']);
  });

  it('schedules a process placed on an available runtime to that runtime', () => {
    fc.assert(
      fc.property(snapshotArb, fc.nat(), requestArb, (states, pick, req) => {
        const index = ClusterIndex.from(states);
        const open = index.runtimes().filter((r) => r.available);
        fc.pre(open.length > 0);
        const target = open[pick % open.length]!;
        index.apply({ op: 'process.add', runtimeId: target.id, process: 'placed' });
        const decision = schedule(index, {
          ...req,
          class: target.classes[pick % target.classes.length]!,
          processId: 'placed',
          sticky: true,
          affinity: [],
          processSelector: [],
          exclude: [],
        });
        assert.ok(decision.ok, JSON.stringify(decision));
        assert.equal(decision.runtime, target.id);
        assert.equal(decision.source, 'process');
      }),
      { numRuns: 500 },
    );
  });

  it('places 100,000 new processes within 2 % of the 1:2:3 weight shares', () => {
    const index = ClusterIndex.from([
      state(runtime('w1', { idleWeight: { s: 100 } })),
      state(runtime('w2', { idleWeight: { s: 200 } })),
      state(runtime('w3', { idleWeight: { s: 300 } })),
    ]);
    const placed = new Map<string, number>();
    const total = 100_000;
    for (let i = 0; i < total; i++) {
      const decision = schedule(index, { class: 'default', processId: `proc-${i}`, sticky: true });
      assert.ok(decision.ok);
      placed.set(decision.runtime, (placed.get(decision.runtime) ?? 0) + 1);
    }
    for (const [id, share] of [
      ['w1', 1 / 6],
      ['w2', 2 / 6],
      ['w3', 3 / 6],
    ] as const) {
      const actual = (placed.get(id) ?? 0) / total;
      assert.ok(Math.abs(actual - share) <= 0.02, `${id}: ${actual.toFixed(4)} vs ${share.toFixed(4)}`);
    }
  });

  it('finds every thread where the canonical states list it, after any ops', () => {
    fc.assert(
      fc.property(snapshotArb, fc.array(opArb, { maxLength: 30 }), (states, ops) => {
        const index = ClusterIndex.from(states);
        index.applyAll(ops);
        // First runtime (by id) listing each thread, and first available one.
        const expected = new Map<string, string>();
        const servable = new Map<string, string>();
        for (const { runtime: r, threads } of index.toStates()) {
          for (const { process, thread } of threads) {
            const key = `${process}/${thread}`;
            if (!expected.has(key)) expected.set(key, r.id);
            if (r.available && !servable.has(key)) servable.set(key, r.id);
          }
        }
        for (const process of PROCESSES) {
          for (const thread of THREADS) {
            const where = expected.get(`${process}/${thread}`);
            assert.equal(index.threadRuntime(process, thread), where);
            const decision = schedule(index, { class: 'x', processId: process, threadId: thread, sticky: true });
            const fast = decision.ok && decision.source === 'thread' ? decision.runtime : undefined;
            assert.equal(fast, servable.get(`${process}/${thread}`));
          }
        }
      }),
      { numRuns: 300 },
    );
  });

  it('restores the snapshot when a delta is followed by its inverse', () => {
    fc.assert(
      fc.property(snapshotArb, fc.array(opArb, { maxLength: 30 }), (states, ops) => {
        const index = ClusterIndex.from(states);
        const before = index.toStates();
        const countsBefore = index.counts();
        const undo: ClusterOp[] = [];
        for (const op of ops) {
          undo.unshift(...index.inverse(op));
          index.apply(op);
        }
        index.applyAll(undo);
        assert.deepEqual(index.toStates(), before);
        assert.deepEqual(index.counts(), countsBefore);
      }),
      { numRuns: 500 },
    );
  });

  it('turns prev into next by applying diffStates(prev, next)', () => {
    fc.assert(
      fc.property(snapshotArb, snapshotArb, (a, b) => {
        const prev = ClusterIndex.from(a).toStates();
        const next = ClusterIndex.from(b).toStates();
        const index = ClusterIndex.from(prev);
        index.applyAll(diffStates(prev, next));
        assert.deepEqual(index.toStates(), next);
        assert.deepEqual(diffStates(next, next), []);
      }),
      { numRuns: 500 },
    );
  });

  // Followers keep each epoch's state as applyOps(previous, delta), and the
  // leader diffs its merges: both must agree on every pair of snapshots.
  it('applyOps(prev, diffStates(prev, next)) is next, epoch after epoch', () => {
    fc.assert(
      fc.property(fc.array(snapshotArb, { minLength: 2, maxLength: 6 }), fc.integer(), (snapshots, seed) => {
        const [first, ...rest] = snapshots.map((s) => ClusterIndex.from(s).toStates());
        let kept = first!;
        for (const [i, next] of rest.entries()) {
          const frozen = JSON.stringify(kept);
          const ops = diffStates(reordered(kept, seed + i), reordered(next, seed - i));
          const applied = applyOps(kept, ops);
          assert.deepEqual(applied, next);
          assert.equal(JSON.stringify(kept), frozen, 'the base is left as it was');
          kept = applied;
        }
      }),
      { numRuns: 500, seed: 20261206 },
    );
  });

  it('diffs states given in any order as it diffs their canonical form', () => {
    fc.assert(
      fc.property(snapshotArb, snapshotArb, fc.integer(), (a, b, seed) => {
        const prev = ClusterIndex.from(a).toStates();
        const next = ClusterIndex.from(b).toStates();
        const index = ClusterIndex.from(prev);
        index.applyAll(diffStates(reordered(prev, seed), reordered(next, seed + 1)));
        assert.deepEqual(index.toStates(), next);
      }),
      { numRuns: 500 },
    );
  });
});
