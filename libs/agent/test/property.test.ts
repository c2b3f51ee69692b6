import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { ManualClock, within } from '@switchyard/clock/testing';
import type { SwitchyardError } from '@switchyard/protocol';
import { RuntimeMirror, RuntimeStateStore, createWatchHandler, watchRuntime } from '../src/index.ts';
import type { RuntimeWatcher } from '../src/index.ts';
import { Waiter, startServer } from './helpers.ts';
import type { TestServer } from './helpers.ts';

const RUNS = 50;
const OPS_PER_RUN = 200;
const HISTORY_BATCHES_MAX = 6;
const SNAPSHOT_INTERVAL_MS = 1_000;

type Op =
  | { kind: 'addProcess'; pid: string }
  | { kind: 'removeProcess'; pid: string }
  | { kind: 'addThread'; pid: string; tid: string }
  | { kind: 'removeThread'; pid: string; tid: string }
  | { kind: 'weight'; value: number }
  | { kind: 'metadata'; value: string };

/** What happens besides state changes: flushes, the client leaving and coming back, the network cutting the stream. */
type Control = 'flush' | 'clientDisconnect' | 'clientReconnect' | 'networkCut' | 'snapshotTick';

// Few ids, so adds and removes of the same key collide and coalesce often.
const pid = fc.constantFrom('p0', 'p1', 'p2', 'p3');
const tid = fc.constantFrom('t0', 't1', 't2');
const op: fc.Arbitrary<Op> = fc.oneof(
  fc.record({ kind: fc.constant('addProcess' as const), pid }),
  fc.record({ kind: fc.constant('removeProcess' as const), pid }),
  fc.record({ kind: fc.constant('addThread' as const), pid, tid }),
  fc.record({ kind: fc.constant('addThread' as const), pid, tid }),
  fc.record({ kind: fc.constant('removeThread' as const), pid, tid }),
  fc.record({ kind: fc.constant('weight' as const), value: fc.integer({ min: 0, max: 3 }) }),
  fc.record({ kind: fc.constant('metadata' as const), value: fc.constantFrom('a', 'b') }),
);
const control: fc.Arbitrary<Control> = fc.oneof(
  { arbitrary: fc.constant('flush' as const), weight: 6 },
  { arbitrary: fc.constant('clientDisconnect' as const), weight: 1 },
  { arbitrary: fc.constant('clientReconnect' as const), weight: 1 },
  { arbitrary: fc.constant('networkCut' as const), weight: 1 },
  { arbitrary: fc.constant('snapshotTick' as const), weight: 1 },
);
const step = fc.record({ op, control: fc.option(control, { freq: 3 }) });
const script = fc.array(step, { minLength: OPS_PER_RUN, maxLength: OPS_PER_RUN });

function apply(store: RuntimeStateStore, o: Op): void {
  if (o.kind === 'addProcess') store.addProcess(o.pid);
  else if (o.kind === 'removeProcess') store.removeProcess(o.pid);
  else if (o.kind === 'addThread') store.addThread(o.pid, o.tid);
  else if (o.kind === 'removeThread') store.removeThread(o.pid, o.tid);
  else if (o.kind === 'weight') store.setIdleWeight({ sandboxes: o.value });
  else store.setMetadata({ zone: o.value });
}

describe('watch stream property', () => {
  let server: TestServer;
  let opsApplied = 0;
  const resumes = { replayed: 0, snapshotFallback: 0 };

  before(async () => {
    server = await startServer((_req, res) => res.end());
  });
  after(() => server.close());

  it('applying the emitted stream to an empty mirror always ends at the store snapshot', async () => {
    await fc.assert(
      fc.asyncProperty(script, async (steps) => {
        const clock = new ManualClock();
        const store = new RuntimeStateStore({ clock, seqStart: 0, historyBatchesMax: HISTORY_BATCHES_MAX });
        const handler = createWatchHandler(store, { clock, snapshotIntervalMs: SNAPSHOT_INTERVAL_MS });
        server.handler = (req, res) => {
          const id = req.headers['last-event-id'];
          if (typeof id === 'string') {
            if (store.batchesSince(Number(id)) === undefined) resumes.snapshotFallback++;
            else resumes.replayed++;
          }
          handler(req, res);
        };
        const mirror = new RuntimeMirror();
        const waiter = new Waiter();
        const unexpected: SwitchyardError[] = [];
        let lastEventId: string | undefined;
        let watcher: RuntimeWatcher | undefined;
        const connect = (): void => {
          watcher = watchRuntime({
            url: `${server.url}/watch`,
            fetch,
            reconnectMs: 0,
            lastEventId,
            onSnapshot: (s) => (mirror.applySnapshot(s), waiter.poke()),
            onOps: (ops) => (mirror.applyOps(ops), waiter.poke()),
            onError: (e) => {
              if (e.code !== 'upstream_unavailable') unexpected.push(e);
              waiter.poke();
            },
          });
        };
        connect();
        try {
          for (const { op: o, control: c } of steps) {
            apply(store, o);
            opsApplied++;
            if (c === 'flush') store.flush();
            else if (c === 'clientDisconnect' && watcher) {
              lastEventId = watcher.lastEventId;
              watcher.close();
              watcher = undefined;
            } else if (c === 'clientReconnect' && !watcher) connect();
            else if (c === 'networkCut') server.dropConnections();
            else if (c === 'snapshotTick') await clock.advance(SNAPSHOT_INTERVAL_MS);
            // Lets the stream make progress between steps, so cuts land mid-stream rather than only at the end.
            if (c) await new Promise((resolve) => setImmediate(resolve));
          }
          if (!watcher) connect();
          store.flush();
          const target = String(store.seq);
          await within(
            waiter.until(() => watcher!.lastEventId === target),
            5_000,
            `watcher stuck at ${watcher!.lastEventId}, store at ${target}`,
          );
          assert.deepEqual(unexpected, []);
          assert.deepEqual(mirror.state(), store.snapshot());
        } finally {
          watcher?.close();
          handler.close();
          store.close();
        }
      }),
      { numRuns: RUNS },
    );
    assert.ok(opsApplied >= RUNS * OPS_PER_RUN, `ran ${opsApplied} ops`);
    // The property is only as good as the paths it went down: both kinds of resume must have happened.
    assert.ok(resumes.replayed > 0 && resumes.snapshotFallback > 0, JSON.stringify(resumes));
  });
});
