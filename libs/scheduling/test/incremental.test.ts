import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import type { ClusterOp, RuntimeState } from '@switchyard/protocol';
import { ClusterIndex, applyOps, mergeParts, schedule } from '@switchyard/scheduling';
import { request, runtime } from './fixtures.ts';

const ids = ['r0', 'r1', 'r2'];
const classes = ['demo', 'other'];

const opArb: fc.Arbitrary<ClusterOp> = fc.oneof(
  fc
    .record({
      id: fc.constantFrom(...ids),
      cls: fc.subarray(classes, { minLength: 1 }),
      available: fc.boolean(),
      weight: fc.integer({ min: 0, max: 3 }),
      generation: fc.integer({ min: 0, max: 3 }),
      owner: fc.constantFrom('s0', 's1'),
    })
    .map(({ id, cls, available, weight, generation, owner }) => ({
      op: 'runtime.upsert' as const,
      runtime: runtime(id, { classes: cls, available, idleWeight: { sandboxes: weight }, generation, owner }),
    })),
  fc.constantFrom(...ids).map((runtimeId) => ({ op: 'runtime.remove' as const, runtimeId })),
  fc
    .record({ runtimeId: fc.constantFrom(...ids), available: fc.boolean() })
    .map((r) => ({ op: 'runtime.available' as const, ...r })),
  fc.record({ runtimeId: fc.constantFrom(...ids), w: fc.integer({ min: 0, max: 3 }) }).map(({ runtimeId, w }) => ({
    op: 'weight' as const,
    runtimeId,
    idleWeight: { sandboxes: w },
  })),
  fc
    .record({ runtimeId: fc.constantFrom(...ids), process: fc.constantFrom('p0', 'p1') })
    .map((r) => ({ op: 'process.add' as const, ...r })),
  fc
    .record({ runtimeId: fc.constantFrom(...ids), process: fc.constantFrom('p0', 'p1') })
    .map((r) => ({ op: 'process.remove' as const, ...r })),
);

describe('an index changed by ops', () => {
  it('answers exactly as an index rebuilt from its own states', () => {
    fc.assert(
      fc.property(
        fc.array(opArb, { maxLength: 40 }),
        fc.array(fc.constantFrom('p0', 'p1', 'p2', 'p3'), { minLength: 1, maxLength: 4 }),
        (ops, pids) => {
          const live = ClusterIndex.from([]);
          const probe = (index: ClusterIndex): unknown[] =>
            classes.flatMap((cls) => [
              index.runtimesOfClass(cls).map((r) => r.id),
              ...pids.map((pid) => {
                const d = schedule(index, request({ class: cls, processId: pid }));
                return d.ok ? d.runtime : d.unschedulable.code;
              }),
            ]);
          for (const op of ops) {
            live.apply(op);
            assert.deepEqual(probe(live), probe(ClusterIndex.from(live.toStates())), JSON.stringify(op));
          }
        },
      ),
      { numRuns: 500 },
    );
  });
});

describe('applyOps on wire states', () => {
  const threadOps: fc.Arbitrary<ClusterOp> = fc.oneof(
    fc
      .record({
        runtimeId: fc.constantFrom(...ids),
        process: fc.constantFrom('p0', 'p1', 'p2'),
        thread: fc.constantFrom('t0', 't1', 't2'),
      })
      .map((r) => ({ op: 'thread.add' as const, ...r })),
    fc
      .record({
        runtimeId: fc.constantFrom(...ids),
        process: fc.constantFrom('p0', 'p1', 'p2'),
        thread: fc.constantFrom('t0', 't1', 't2'),
      })
      .map((r) => ({ op: 'thread.remove' as const, ...r })),
    fc
      .record({
        runtimeId: fc.constantFrom(...ids),
        metadata: fc.dictionary(fc.constantFrom('zone', 'gpu'), fc.constantFrom('a', 'b')),
      })
      .map((r) => ({ op: 'metadata' as const, ...r })),
  );
  const anyOp = fc.oneof(opArb, threadOps);

  it('returns what a ClusterIndex round trip returns, and leaves its input as it was', () => {
    fc.assert(
      fc.property(fc.array(anyOp, { maxLength: 30 }), fc.array(anyOp, { maxLength: 30 }), (setup, ops) => {
        const seeded = ClusterIndex.from([]);
        seeded.applyAll(setup);
        const before = seeded.toStates();
        const frozen = JSON.stringify(before);
        const viaIndex = ClusterIndex.from(before);
        viaIndex.applyAll(ops);
        assert.deepEqual(applyOps(before, ops), viaIndex.toStates());
        assert.equal(JSON.stringify(before), frozen);
      }),
      { numRuns: 1000 },
    );
  });
});

/** A canonical state made non-canonical in one way a careless reporter could. */
function disordered(state: RuntimeState, how: string): RuntimeState {
  const { processes, threads } = state;
  switch (how) {
    case 'reversed':
      return { ...state, processes: [...processes].reverse(), threads: [...threads].reverse() };
    case 'duplicated':
      return { ...state, processes: [...processes, ...processes], threads: [...threads, ...threads] };
    case 'processes omitted':
      return { ...state, processes: processes.filter((p) => !threads.some((t) => t.process === p)) };
    default:
      return state;
  }
}

describe('mergeParts', () => {
  it('equals an index built from every report, for canonical and disordered parts alike', () => {
    fc.assert(
      fc.property(
        fc.array(fc.array(opArb, { maxLength: 20 }), { minLength: 1, maxLength: 3 }),
        fc.constantFrom('canonical', 'reversed', 'duplicated', 'processes omitted'),
        (partOps, disorder) => {
          const parts = partOps.map((ops) => {
            const index = ClusterIndex.from([]);
            index.applyAll(ops);
            return index.toStates().map((s) => disordered(s, disorder));
          });
          assert.deepEqual(mergeParts(parts), ClusterIndex.from(parts.flat()).toStates());
          // A second merge of the same objects answers from memory, equally.
          assert.deepEqual(mergeParts(parts), ClusterIndex.from(parts.flat()).toStates());
        },
      ),
      { numRuns: 500 },
    );
  });
});

describe('single-runtime reads', () => {
  it('state(id) and summaries() agree with toStates()', () => {
    fc.assert(
      fc.property(fc.array(opArb, { maxLength: 30 }), (ops) => {
        const index = ClusterIndex.from([]);
        index.applyAll(ops);
        const states = index.toStates();
        for (const state of states) assert.deepEqual(index.state(state.runtime.id), state);
        assert.equal(index.state('absent'), undefined);
        assert.deepEqual(
          index.summaries(),
          states.map((s) => ({ runtime: s.runtime, processes: s.processes.length, threads: s.threads.length })),
        );
      }),
      { numRuns: 300 },
    );
  });
});
