import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { ManualClock } from '@switchyard/clock/testing';
import type { RuntimeOp } from '@switchyard/protocol';
import { DRAINING_METADATA_KEY, RUNTIME_LIMITS, SwitchyardError } from '@switchyard/protocol';
import { MIRROR_DEFAULTS, RuntimeMirror, RuntimeStateStore } from '../src/index.ts';
import type { RuntimeBatch } from '../src/index.ts';

function setup(options: { historyBatchesMax?: number; pendingKeysMax?: number } = {}) {
  const clock = new ManualClock();
  const store = new RuntimeStateStore({ clock, seqStart: 0, ...options });
  const batches: RuntimeBatch[] = [];
  store.subscribe((b) => batches.push(b));
  return { clock, store, batches };
}

type Step = (s: RuntimeStateStore) => unknown;

const COALESCING: { name: string; before?: Step; steps: Step[]; ops: RuntimeOp[] }[] = [
  {
    name: 'an add then a remove of the same process cancel',
    steps: [(s) => s.addProcess('p1'), (s) => s.removeProcess('p1')],
    ops: [],
  },
  {
    name: 'a remove then an add of an existing process cancel',
    before: (s) => s.addProcess('p1'),
    steps: [(s) => s.removeProcess('p1'), (s) => s.addProcess('p1')],
    ops: [],
  },
  {
    name: 'an add then a remove of the same thread cancel',
    before: (s) => s.addProcess('p1'),
    steps: [(s) => s.addThread('p1', 't1'), (s) => s.removeThread('p1', 't1')],
    ops: [],
  },
  {
    name: 'adding a thread to a new process adds the process first',
    steps: [(s) => s.addThread('p1', 't1')],
    ops: [
      { op: 'process.add', process: 'p1' },
      { op: 'thread.add', process: 'p1', thread: 't1' },
    ],
  },
  {
    name: 'removing a process removes its threads without a thread op each',
    before: (s) => (s.addThread('p1', 't1'), s.addThread('p1', 't2')),
    steps: [(s) => s.removeProcess('p1')],
    ops: [{ op: 'process.remove', process: 'p1' }],
  },
  {
    name: 'a process removed and re-added with a new thread loses only its old threads',
    before: (s) => s.addThread('p1', 't1'),
    steps: [(s) => s.removeProcess('p1'), (s) => s.addThread('p1', 't2')],
    ops: [
      { op: 'thread.remove', process: 'p1', thread: 't1' },
      { op: 'thread.add', process: 'p1', thread: 't2' },
    ],
  },
  {
    name: 'repeated weights keep the last',
    steps: [(s) => s.setIdleWeight({ sandboxes: 3 }), (s) => s.setIdleWeight({ sandboxes: 2, cpu: 1 })],
    ops: [{ op: 'weight', idleWeight: { cpu: 1, sandboxes: 2 } }],
  },
  {
    name: 'a weight set back to its flushed value emits nothing',
    before: (s) => s.setIdleWeight({ sandboxes: 3 }),
    steps: [(s) => s.setIdleWeight({ sandboxes: 1 }), (s) => s.setIdleWeight({ sandboxes: 3 })],
    ops: [],
  },
  {
    name: 'repeated metadata keeps the last',
    steps: [(s) => s.setMetadata({ zone: 'a' }), (s) => s.setMetadata({ zone: 'b' })],
    ops: [{ op: 'metadata', metadata: { zone: 'b' } }],
  },
  {
    name: 'adding an existing process emits nothing',
    before: (s) => s.addProcess('p1'),
    steps: [(s) => s.addProcess('p1')],
    ops: [],
  },
  {
    name: 'removing an absent thread emits nothing',
    before: (s) => s.addProcess('p1'),
    steps: [(s) => s.removeThread('p1', 'nope'), (s) => s.removeProcess('p2')],
    ops: [],
  },
  {
    name: 'removals come before additions whatever the call order',
    before: (s) => s.addThread('old', 't1'),
    steps: [(s) => s.addProcess('new'), (s) => s.removeThread('old', 't1'), (s) => s.removeProcess('old')],
    ops: [
      { op: 'process.remove', process: 'old' },
      { op: 'process.add', process: 'new' },
    ],
  },
];

describe('RuntimeStateStore coalescing', () => {
  for (const c of COALESCING) {
    it(c.name, async () => {
      const { clock, store, batches } = setup();
      c.before?.(store);
      store.flush();
      const seqBefore = store.seq;
      const mirror = new RuntimeMirror();
      mirror.applySnapshot(store.snapshot());
      batches.length = 0;
      for (const step of c.steps) step(store);
      await clock.advance(5);
      assert.deepEqual(
        batches.map((b) => b.ops),
        c.ops.length === 0 ? [] : [c.ops],
      );
      assert.equal(store.seq, seqBefore + (c.ops.length === 0 ? 0 : 1));
      mirror.applyOps(c.ops);
      assert.deepEqual(mirror.state(), store.snapshot());
    });
  }
});

describe('RuntimeStateStore feed', () => {
  it('flushes once after the flush delay, not before', async () => {
    const { clock, store, batches } = setup();
    store.addProcess('a');
    await clock.advance(2);
    store.addProcess('b');
    await clock.advance(2);
    assert.equal(batches.length, 0);
    await clock.advance(1);
    assert.deepEqual(batches, [
      {
        seq: 1,
        ops: [
          { op: 'process.add', process: 'a' },
          { op: 'process.add', process: 'b' },
        ],
      },
    ]);
  });

  it('numbers batches with increasing seq starting after seqStart', async () => {
    const { clock, store, batches } = setup();
    for (const pid of ['a', 'b', 'c']) {
      store.addProcess(pid);
      await clock.advance(5);
    }
    assert.deepEqual(
      batches.map((b) => b.seq),
      [1, 2, 3],
    );
  });

  it('flushes early when too many keys are pending', () => {
    const { store, batches } = setup({ pendingKeysMax: 3 });
    for (const pid of ['a', 'b', 'c']) store.addProcess(pid);
    assert.equal(batches.length, 1);
    assert.equal(batches[0]!.ops.length, 3);
  });

  it('snapshot() flushes pending changes so it matches seq', () => {
    const { store, batches } = setup();
    store.addProcess('a');
    const snap = store.snapshot();
    assert.deepEqual(snap.processes, ['a']);
    assert.equal(store.seq, 1);
    assert.equal(batches.length, 1);
  });

  it('keeps only the newest historyBatchesMax batches for resumes', () => {
    const { store } = setup({ historyBatchesMax: 3 });
    for (const pid of ['a', 'b', 'c', 'd', 'e']) {
      store.addProcess(pid);
      store.flush();
    }
    assert.equal(store.seq, 5);
    assert.deepEqual(
      store.batchesSince(2)?.map((b) => b.seq),
      [3, 4, 5],
    );
    assert.deepEqual(store.batchesSince(5), []);
    assert.equal(store.batchesSince(1), undefined, 'older than the history');
    assert.equal(store.batchesSince(6), undefined, 'from the future (another life of the runtime)');
  });

  it('seq defaults to the clock so a restarted runtime numbers above its previous life', () => {
    const clock = new ManualClock(1_000);
    assert.equal(new RuntimeStateStore({ clock }).seq, 1_000);
  });

  it('unsubscribe stops delivery and close() is idempotent', async () => {
    const { clock, store } = setup();
    const seen: number[] = [];
    const off = store.subscribe((b) => seen.push(b.seq));
    store.addProcess('a');
    await clock.advance(5);
    off();
    store.addProcess('b');
    await clock.advance(5);
    assert.deepEqual(seen, [1]);
    store.close();
    store.close();
    assert.throws(() => store.subscribe(() => undefined), SwitchyardError);
  });

  it('a throwing subscriber does not keep the batch from the others', () => {
    const errors: unknown[] = [];
    const store = new RuntimeStateStore({ seqStart: 0, onListenerError: (e) => errors.push(e) });
    const seen: number[] = [];
    store.subscribe(() => {
      throw new Error('boom');
    });
    store.subscribe((b) => seen.push(b.seq));
    store.addProcess('a');
    store.flush();
    assert.deepEqual(seen, [1]);
    assert.equal(errors.length, 1);
    store.close();
  });
});

describe('RuntimeStateStore drain', () => {
  it('reports every dimension of the idle weight as 0 from then on, keeping processes and threads', async () => {
    const { clock, store, batches } = setup();
    store.addThread('p1', 't1');
    store.setIdleWeight({ sandboxes: 3, cpu: 2 });
    store.flush();
    batches.length = 0;
    store.drain();
    await clock.advance(5);
    assert.deepEqual(
      batches.map((b) => b.ops),
      [
        [
          { op: 'weight', idleWeight: { cpu: 0, sandboxes: 0 } },
          { op: 'metadata', metadata: { [DRAINING_METADATA_KEY]: 'true' } },
        ],
      ],
    );
    // A sandbox ending afterwards frees capacity that a draining runtime does not offer.
    assert.equal(store.setIdleWeight({ sandboxes: 4, cpu: 2 }), false);
    store.setIdleWeight({ sandboxes: 4, cpu: 2, memory: 1 });
    store.drain();
    const state = store.snapshot();
    assert.deepEqual(state.idleWeight, { cpu: 0, memory: 0, sandboxes: 0 });
    assert.deepEqual(state.processes, ['p1']);
    assert.deepEqual(state.threads, [{ process: 'p1', thread: 't1' }]);
  });

  it('reports a weight of no dimension, which schedulers count as open, as no sandboxes', () => {
    const { store } = setup();
    store.drain();
    assert.deepEqual(store.snapshot().idleWeight, { sandboxes: 0 });
  });

  it('marks its metadata as draining, and keeps the mark through later metadata', async () => {
    const { clock, store, batches } = setup();
    store.setMetadata({ zone: 'eu-1' });
    store.flush();
    batches.length = 0;
    store.drain();
    await clock.advance(5);
    assert.deepEqual(batches.at(-1)!.ops.at(-1), {
      op: 'metadata',
      metadata: { [DRAINING_METADATA_KEY]: 'true', zone: 'eu-1' },
    });
    store.setMetadata({ zone: 'eu-2' });
    assert.deepEqual(store.snapshot().metadata, { [DRAINING_METADATA_KEY]: 'true', zone: 'eu-2' });
  });

  it('reserves the mark: metadata set before a drain cannot carry it', () => {
    const { store } = setup();
    assert.equal(store.setMetadata({ [DRAINING_METADATA_KEY]: 'true' }), false);
    assert.deepEqual(store.snapshot().metadata, {});
  });

  it('leaves the mark out where one more entry would pass the limit', () => {
    const { store } = setup();
    const full = Object.fromEntries(
      Array.from({ length: RUNTIME_LIMITS.metadataEntriesMax }, (_, i) => [`k${i}`, 'v']),
    );
    store.setMetadata(full);
    store.drain();
    assert.deepEqual(store.snapshot().metadata, full);
    assert.deepEqual(store.snapshot().idleWeight, { sandboxes: 0 });
  });
});

describe('RuntimeStateStore validation and limits', () => {
  const CASES: { name: string; run: (s: RuntimeStateStore) => unknown; code: string; field?: string }[] = [
    { name: 'rejects a bad process id', run: (s) => s.addProcess('a b'), code: 'bad_identity', field: 'process' },
    { name: 'rejects an empty thread id', run: (s) => s.addThread('p', ''), code: 'bad_identity', field: 'thread' },
    { name: 'rejects a negative weight', run: (s) => s.setIdleWeight({ x: -1 }), code: 'invalid_request' },
    {
      name: 'rejects a non-string metadata value',
      run: (s) => s.setMetadata({ k: 1 as unknown as string }),
      code: 'invalid_request',
    },
    {
      name: 'refuses a process past processesMax',
      run: (s) => (s.addProcess('a'), s.addProcess('b'), s.addProcess('c')),
      code: 'capacity_exhausted',
    },
    {
      name: 'refuses a thread past threadsMax',
      run: (s) => (s.addThread('a', '1'), s.addThread('a', '2'), s.addThread('a', '3')),
      code: 'capacity_exhausted',
    },
  ];
  for (const c of CASES) {
    it(c.name, () => {
      const store = new RuntimeStateStore({ seqStart: 0, processesMax: 2, threadsMax: 2 });
      assert.throws(
        () => c.run(store),
        (e: unknown) =>
          e instanceof SwitchyardError && e.code === c.code && (c.field === undefined || e.message.startsWith(c.field)),
      );
      store.close();
    });
  }
});

describe('RuntimeMirror', () => {
  it('calls onChange after a snapshot and after non-empty ops only', () => {
    let changes = 0;
    const mirror = new RuntimeMirror({ onChange: () => changes++ });
    mirror.applySnapshot({
      processes: ['b', 'a'],
      threads: [{ process: 'a', thread: 't' }],
      idleWeight: {},
      metadata: {},
    });
    mirror.applyOps([]);
    mirror.applyOps([{ op: 'process.remove', process: 'a' }]);
    assert.equal(changes, 2);
    assert.deepEqual(mirror.state(), { processes: ['b'], threads: [], idleWeight: {}, metadata: {} });
  });

  it('refuses an op that would take it past its limits, before applying it, and reports no change', () => {
    // Each event is checked on its own; only the mirror sees deltas add up, and past the limits
    // its state would fail runtimeStateSchema wherever it went next (the leader refuses the collect).
    let changes = 0;
    const mirror = new RuntimeMirror({ processesMax: 2, threadsMax: 2, onChange: () => changes++ });
    mirror.applyOps([
      { op: 'thread.add', process: 'a', thread: '1' },
      { op: 'process.add', process: 'b' },
    ]);
    for (const ops of [
      [{ op: 'process.add', process: 'c' }],
      [{ op: 'thread.add', process: 'c', thread: '1' }],
      [
        { op: 'thread.add', process: 'b', thread: '1' },
        { op: 'thread.add', process: 'b', thread: '2' },
      ],
    ] as RuntimeOp[][]) {
      assert.throws(() => mirror.applyOps(ops), { code: 'capacity_exhausted' }, JSON.stringify(ops));
      assert.ok(mirror.processCount <= 2 && mirror.threadCount <= 2, JSON.stringify(mirror.state()));
    }
    assert.equal(changes, 1, 'a refused batch is not reported as a change');
    mirror.applyOps([
      { op: 'process.remove', process: 'a' },
      { op: 'process.remove', process: 'b' },
      { op: 'thread.add', process: 'c', thread: '1' },
      { op: 'thread.add', process: 'c', thread: '2' },
      { op: 'thread.add', process: 'c', thread: '2' },
      { op: 'process.add', process: 'd' },
    ]);
    assert.deepEqual(mirror.state().processes, ['c', 'd'], 'ops that free room first are applied in order');
    assert.equal(mirror.threadCount, 2);
  });

  it('refuses a snapshot whose threads name processes past its limits, keeping what it had', () => {
    // The schema bounds the lists of a snapshot, but a thread's process need not be listed: it is added.
    const mirror = new RuntimeMirror({ processesMax: 2 });
    mirror.applySnapshot({ processes: ['a'], threads: [], idleWeight: {}, metadata: {} });
    assert.throws(
      () =>
        mirror.applySnapshot({
          processes: ['b', 'c'],
          threads: [{ process: 'd', thread: '1' }],
          idleWeight: {},
          metadata: {},
        }),
      { code: 'capacity_exhausted' },
    );
    assert.deepEqual(mirror.state().processes, ['a']);
  });

  it('has the limits of the runtime state every replica accepts by default', () => {
    assert.deepEqual(MIRROR_DEFAULTS, {
      processesMax: RUNTIME_LIMITS.processesMax,
      threadsMax: RUNTIME_LIMITS.threadsMax,
    });
  });

  it('orders state canonically whatever the arrival order', () => {
    const one = new RuntimeMirror();
    const two = new RuntimeMirror();
    one.applyOps([
      { op: 'thread.add', process: 'z', thread: '2' },
      { op: 'thread.add', process: 'a', thread: '1' },
      { op: 'weight', idleWeight: { b: 1, a: 2 } },
    ]);
    two.applyOps([
      { op: 'thread.add', process: 'a', thread: '1' },
      { op: 'weight', idleWeight: { a: 2, b: 1 } },
      { op: 'thread.add', process: 'z', thread: '2' },
    ]);
    assert.deepEqual(one.state(), two.state());
    assert.equal(JSON.stringify(one.state()), JSON.stringify(two.state()));
  });
});
