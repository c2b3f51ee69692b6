import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { ClusterIndex, diffStates, mergeParts } from '@switchyard/scheduling';
import type { ClusterOp, RuntimeState } from '@switchyard/protocol';
import { runtime, state } from './fixtures.ts';

const base = (): RuntimeState[] => [
  state(runtime('r2', { classes: ['b', 'a'] }), ['p1'], [['p1', 't1']]),
  state(
    runtime('r1', { classes: ['a'] }),
    ['p2', 'p1'],
    [
      ['p2', 't9'],
      ['p2', 't3'],
    ],
  ),
];

describe('ClusterIndex', () => {
  it('answers lookups sorted by id whatever the input order', () => {
    const index = ClusterIndex.from(base());
    assert.deepEqual(
      index.runtimes().map((r) => r.id),
      ['r1', 'r2'],
    );
    assert.deepEqual(
      index.runtimesOfClass('a').map((r) => r.id),
      ['r1', 'r2'],
    );
    assert.deepEqual(
      index.runtimesOfClass('b').map((r) => r.id),
      ['r2'],
    );
    assert.deepEqual(index.runtimesOfClass('zzz'), []);
    assert.deepEqual(index.holdersOf('p1'), ['r1', 'r2']);
    assert.equal(index.threadRuntime('p2', 't3'), 'r1');
    assert.equal(index.threadRuntime('p2', 'nope'), undefined);
    assert.deepEqual(index.counts(), { runtimes: 2, processes: 3, threads: 3 });
    assert.deepEqual(index.runtime('r2')?.classes, ['a', 'b']);
  });

  it('emits canonical states: runtimes, processes and threads sorted', () => {
    const states = ClusterIndex.from(base()).toStates();
    assert.deepEqual(
      states.map((s) => [s.runtime.id, s.processes, s.threads.map((t) => `${t.process}/${t.thread}`)]),
      [
        ['r1', ['p1', 'p2'], ['p2/t3', 'p2/t9']],
        ['r2', ['p1'], ['p1/t1']],
      ],
    );
  });

  const opCases: { name: string; ops: ClusterOp[]; check: (index: ClusterIndex) => void }[] = [
    {
      name: 'removing a runtime removes its processes and threads',
      ops: [{ op: 'runtime.remove', runtimeId: 'r1' }],
      check: (index) => {
        assert.deepEqual(index.holdersOf('p2'), []);
        assert.deepEqual(index.holdersOf('p1'), ['r2']);
        assert.equal(index.threadRuntime('p2', 't3'), undefined);
        assert.deepEqual(index.counts(), { runtimes: 1, processes: 1, threads: 1 });
        assert.deepEqual(
          index.runtimesOfClass('a').map((r) => r.id),
          ['r2'],
        );
      },
    },
    {
      name: 'adding a thread adds its process on that runtime',
      ops: [{ op: 'thread.add', runtimeId: 'r2', process: 'p7', thread: 't1' }],
      check: (index) => {
        assert.deepEqual(index.holdersOf('p7'), ['r2']);
        assert.equal(index.threadRuntime('p7', 't1'), 'r2');
      },
    },
    {
      name: 'removing a process removes its threads there',
      ops: [{ op: 'process.remove', runtimeId: 'r1', process: 'p2' }],
      check: (index) => {
        assert.equal(index.threadRuntime('p2', 't9'), undefined);
        assert.deepEqual(index.counts(), { runtimes: 2, processes: 2, threads: 1 });
      },
    },
    {
      name: 'removing a thread keeps its process',
      ops: [{ op: 'thread.remove', runtimeId: 'r2', process: 'p1', thread: 't1' }],
      check: (index) => {
        assert.deepEqual(index.holdersOf('p1'), ['r1', 'r2']);
        assert.equal(index.threadRuntime('p1', 't1'), undefined);
      },
    },
    {
      name: 'ops on unknown runtimes are ignored',
      ops: [
        { op: 'process.add', runtimeId: 'ghost', process: 'p9' },
        { op: 'thread.add', runtimeId: 'ghost', process: 'p9', thread: 't' },
        { op: 'runtime.remove', runtimeId: 'ghost' },
        { op: 'weight', runtimeId: 'ghost', idleWeight: {} },
      ],
      check: (index) => assert.deepEqual(index.toStates(), ClusterIndex.from(base()).toStates()),
    },
    {
      name: 'upsert changes classes and keeps what the runtime holds',
      ops: [{ op: 'runtime.upsert', runtime: runtime('r2', { classes: ['c'] }) }],
      check: (index) => {
        assert.deepEqual(
          index.runtimesOfClass('a').map((r) => r.id),
          ['r1'],
        );
        assert.deepEqual(index.runtimesOfClass('b'), []);
        assert.deepEqual(
          index.runtimesOfClass('c').map((r) => r.id),
          ['r2'],
        );
        assert.equal(index.threadRuntime('p1', 't1'), 'r2');
      },
    },
    {
      name: 'weight, metadata and availability update the record everywhere it is listed',
      ops: [
        { op: 'weight', runtimeId: 'r1', idleWeight: { m: 2, a: 1 } },
        { op: 'metadata', runtimeId: 'r1', metadata: { zone: 'eu' } },
        { op: 'runtime.available', runtimeId: 'r1', available: false },
      ],
      check: (index) => {
        const expected = { ...runtime('r1', { classes: ['a'] }), idleWeight: { a: 1, m: 2 }, metadata: { zone: 'eu' } };
        assert.deepEqual(index.runtime('r1'), { ...expected, available: false });
        assert.equal(index.runtimesOfClass('a')[0], index.runtime('r1'));
        assert.equal(index.runtimes()[0], index.runtime('r1'));
      },
    },
  ];

  for (const t of opCases) {
    it(t.name, () => {
      const index = ClusterIndex.from(base());
      index.applyAll(t.ops);
      t.check(index);
    });
  }

  for (const t of opCases) {
    it(`inverse undoes: ${t.name}`, () => {
      const index = ClusterIndex.from(base());
      const undo: ClusterOp[][] = [];
      for (const op of t.ops) {
        undo.unshift(index.inverse(op));
        index.apply(op);
      }
      for (const ops of undo) index.applyAll(ops);
      assert.deepEqual(index.toStates(), ClusterIndex.from(base()).toStates());
      assert.deepEqual(index.counts(), ClusterIndex.from(base()).counts());
    });
  }

  it('holder arrays handed out stay unchanged by later ops', () => {
    const index = ClusterIndex.from(base());
    const held = index.holdersOf('p1');
    index.apply({ op: 'process.remove', runtimeId: 'r1', process: 'p1' });
    assert.deepEqual(held, ['r1', 'r2']);
    assert.deepEqual(index.holdersOf('p1'), ['r2']);
  });
});

describe('mergeParts', () => {
  const old = state(runtime('r1', { generation: 1, owner: 'replica-z' }), ['stale']);
  const fresh = state(runtime('r1', { generation: 2, owner: 'replica-a' }), ['fresh']);
  const tieHigh = state(runtime('r1', { generation: 2, owner: 'replica-b' }), ['b']);
  const other = state(runtime('r0'), ['p']);

  const cases: { name: string; parts: RuntimeState[][]; expect: string[] }[] = [
    { name: 'the higher generation wins', parts: [[old], [fresh]], expect: ['fresh'] },
    { name: 'the higher generation wins in either part order', parts: [[fresh], [old]], expect: ['fresh'] },
    { name: 'a generation tie goes to the higher owner', parts: [[tieHigh], [fresh]], expect: ['b'] },
    { name: 'a generation tie goes to the higher owner in either order', parts: [[fresh], [tieHigh]], expect: ['b'] },
  ];
  for (const t of cases) {
    it(t.name, () => {
      const merged = mergeParts([...t.parts, [other]]);
      assert.deepEqual(
        merged.map((s) => s.runtime.id),
        ['r0', 'r1'],
      );
      assert.deepEqual(merged[1]!.processes, t.expect);
    });
  }

  it("keeps each runtime's join token fingerprint through merge, index and diff (replicas check claims on it)", () => {
    const claimed = state(runtime('r1', { generation: 3, tokenFingerprint: 'AAAAAAAAAAAAAAAA' }), ['p']);
    const merged = mergeParts([[claimed], [old]]);
    assert.equal(merged[0]!.runtime.tokenFingerprint, 'AAAAAAAAAAAAAAAA');
    assert.equal(ClusterIndex.from(merged).runtime('r1')?.tokenFingerprint, 'AAAAAAAAAAAAAAAA');
    const redialled = state(runtime('r1', { generation: 3, tokenFingerprint: 'BBBBBBBBBBBBBBBB' }), ['p']);
    const ops = diffStates(merged, [redialled]);
    assert.deepEqual(ops, [{ op: 'runtime.upsert', runtime: redialled.runtime }]);
  });

  it("keeps each runtime's instance through merge, index and diff (replicas refuse its id to another on it)", () => {
    const held = state(runtime('r1', { generation: 3, instance: 'instance-AAAAAAAAAAAA' }), ['p']);
    const merged = mergeParts([[held], [old]]);
    assert.equal(merged[0]!.runtime.instance, 'instance-AAAAAAAAAAAA');
    assert.equal(ClusterIndex.from(merged).runtime('r1')?.instance, 'instance-AAAAAAAAAAAA');
    const restarted = state(runtime('r1', { generation: 3, instance: 'instance-BBBBBBBBBBBB' }), ['p']);
    const ops = diffStates(merged, [restarted]);
    assert.deepEqual(ops, [{ op: 'runtime.upsert', runtime: restarted.runtime }]);
  });

  it('an empty list of parts merges to an empty snapshot', () => {
    assert.deepEqual(mergeParts([]), []);
    assert.deepEqual(mergeParts([[], []]), []);
  });
});

describe('diffStates', () => {
  it('is empty between equal snapshots', () => {
    assert.deepEqual(diffStates(base(), ClusterIndex.from(base()).toStates()), []);
  });

  it('emits only ops proportional to the change and reproduces next', () => {
    const prev = ClusterIndex.from(base()).toStates();
    const next = ClusterIndex.from([
      state(
        runtime('r1', { classes: ['a'], available: false }),
        ['p2', 'p3'],
        [
          ['p2', 't3'],
          ['p3', 'x'],
        ],
      ),
      state(runtime('r3'), ['q']),
    ]).toStates();
    const ops = diffStates(prev, next);
    assert.deepEqual(ops, [
      { op: 'runtime.remove', runtimeId: 'r2' },
      { op: 'runtime.available', runtimeId: 'r1', available: false },
      { op: 'process.remove', runtimeId: 'r1', process: 'p1' },
      { op: 'thread.remove', runtimeId: 'r1', process: 'p2', thread: 't9' },
      { op: 'process.add', runtimeId: 'r1', process: 'p3' },
      { op: 'thread.add', runtimeId: 'r1', process: 'p3', thread: 'x' },
      { op: 'runtime.upsert', runtime: next[1]!.runtime },
      { op: 'process.add', runtimeId: 'r3', process: 'q' },
    ]);
    const index = ClusterIndex.from(prev);
    index.applyAll(ops);
    assert.deepEqual(index.toStates(), next);
  });
});
