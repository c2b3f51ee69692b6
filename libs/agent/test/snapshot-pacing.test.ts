// A big snapshot in parts is written part by part, as the consumer takes them: the runtime's event loop
// stays free for other requests, the response buffers about one part, and deltas that happen meanwhile
// follow the snapshot's end in order.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { ManualClock, within } from '@switchyard/clock/testing';
import { WATCH_EVENTS, WATCH_FEATURES, WATCH_FEATURES_HEADER, WATCH_LIMITS } from '@switchyard/protocol';
import { RuntimeStateStore, createWatchHandler, WATCH_DEFAULTS } from '../src/index.ts';
import type { WatchFetch, WatchHandler } from '../src/index.ts';
import { SseReader, Waiter, deferred, followWatch, fileServer } from './helpers.ts';

const server = fileServer();
const { cleanups } = server;

const ASKS_FOR_PARTS = { [WATCH_FEATURES_HEADER]: WATCH_FEATURES.snapshotParts };
/** 130,000 threads named by 128-character ids: a snapshot of about 36.8 M characters, 14 parts. */
const THREADS = 130_000;
const PARTS = Math.ceil((THREADS + 100) / WATCH_LIMITS.snapshotPartEntriesMax);
/** Bounds every real-time wait, so that a fault fails the test instead of hanging it. */
const WAIT_MS = 60_000;

function bigStore(): RuntimeStateStore {
  const store = new RuntimeStateStore({ seqStart: 0 });
  const id = (prefix: string, i: number): string => `${prefix}-${i}-`.padEnd(128, 'x');
  for (let i = 0; i < THREADS; i++) store.addThread(id('p', i % 100), id('t', i));
  store.flush();
  return store;
}

/** One `res.write` of the watch stream: the event (or `:` for a comment) and the bytes buffered around it. */
interface Write {
  readonly event: string;
  readonly id: string | undefined;
  readonly bytes: number;
  readonly bufferedBefore: number;
  readonly bufferedAfter: number;
}

/** What the watch streams served so far wrote, and the response of the last one. */
interface Recorded {
  readonly writes: Write[];
  readonly waiter: Waiter;
  res: ServerResponse | undefined;
  parts(): number;
}

/** Serves `/watch` with `handler` (its writes recorded) and `/healthz` with a plain 200. */
function serve(handler: WatchHandler): Recorded {
  const recorded: Recorded = {
    writes: [],
    waiter: new Waiter(),
    res: undefined,
    parts: () => recorded.writes.filter((w) => w.event === WATCH_EVENTS.snapshotPart).length,
  };
  server.handler = (req: IncomingMessage, res: ServerResponse) => {
    if (req.url === '/healthz') return void res.end('ok');
    recorded.res = res;
    // After the handler's own 'close' listener, so that its watcher is gone when the waiter looks.
    res.on('close', () => setImmediate(() => recorded.waiter.poke()));
    const write = res.write.bind(res) as (chunk: string) => boolean;
    res.write = ((chunk: string) => {
      const bufferedBefore = res.writableLength;
      const ok = write(chunk);
      const [, event = ':', id] = /^(?:event: ([^\n]*)\nid: (\d+)\n)?/.exec(chunk)!;
      recorded.writes.push({
        event,
        id,
        bytes: Buffer.byteLength(chunk),
        bufferedBefore,
        bufferedAfter: res.writableLength,
      });
      recorded.waiter.poke();
      return ok;
    }) as typeof res.write;
    handler(req, res);
  };
  cleanups.push(() => handler.close());
  return recorded;
}

/** Opens `/watch` and reads nothing of it: a consumer that stalls. */
async function stalledConsumer(): Promise<SseReader> {
  const response = await fetch(`${server.url}/watch`, { headers: ASKS_FOR_PARTS });
  const reader = new SseReader(response);
  cleanups.push(() => void reader.cancel());
  return reader;
}

describe('GET /watch, a big snapshot in parts to a slow consumer', () => {
  let store: RuntimeStateStore;
  before(() => {
    store = bigStore();
  });
  after(() => store.close());

  it('answers another request before the snapshot’s last part is written', async () => {
    const recorded = serve(createWatchHandler(store));
    await stalledConsumer();
    await within(
      recorded.waiter.until(() => recorded.parts() >= 1),
      WAIT_MS,
      'no part written',
    );
    const health = await fetch(`${server.url}/healthz`);
    const partsWhenAnswered = recorded.parts();
    assert.equal(health.status, 200);
    assert.ok(
      partsWhenAnswered < PARTS,
      `/healthz waited for the whole snapshot: answered after ${partsWhenAnswered} of ${PARTS} parts`,
    );
  });

  it('buffers about one part while the consumer reads nothing, and stops when it leaves', async () => {
    const handler = createWatchHandler(store);
    const recorded = serve(handler);
    const reader = await stalledConsumer();
    // Held once the response wants a drain that a consumer that reads nothing never gives.
    await within(
      recorded.waiter.until(() => recorded.res?.writableNeedDrain === true),
      WAIT_MS,
      'never held',
    );
    const res = recorded.res!;
    const partBytesMax = Math.max(...recorded.writes.map((w) => w.bytes));
    const bound = partBytesMax + res.writableHighWaterMark + 1024;
    assert.ok(
      recorded.parts() < PARTS,
      `all ${PARTS} parts were written at once, ${res.writableLength} bytes buffered (bound ${bound})`,
    );
    for (const w of recorded.writes) {
      assert.ok(w.bufferedAfter <= bound, `${w.bufferedAfter} bytes buffered after a ${w.event} (bound ${bound})`);
    }

    const partsBeforeLeaving = recorded.parts();
    await reader.cancel();
    await within(
      recorded.waiter.until(() => handler.watcherCount === 0),
      WAIT_MS,
      'the stream stayed open',
    );
    await new Promise((resolve) => setImmediate(resolve));
    assert.ok(recorded.parts() <= partsBeforeLeaving + 1, 'parts went on after the consumer left');
  });
});

describe('watchRuntime, deltas during a snapshot written in parts', () => {
  it('gets them after the snapshot’s end, in order, and ends with the runtime’s state', async () => {
    const store = bigStore();
    cleanups.push(() => store.close());
    const clock = new ManualClock();
    const recorded = serve(createWatchHandler(store, { clock }));
    const gate = deferred();
    const { mirror, waiter, seen } = followWatch(`${server.url}/watch`, cleanups, {
      fetch: gatedFetch(gate.promise),
    });
    const snapshotSeq = store.seq;
    await within(
      recorded.waiter.until(() => recorded.parts() >= 1),
      WAIT_MS,
      'no part written',
    );

    // Three batches, and the periodic snapshot's (and a ping's) time, while the parts are on their way.
    store.removeProcess(store.snapshot().processes[0]!);
    store.flush();
    store.addThread('late', 'one');
    store.flush();
    store.setIdleWeight({ sandboxes: 7 });
    store.flush();
    await clock.advance(WATCH_DEFAULTS.snapshotIntervalMs);
    assert.ok(
      recorded.parts() < PARTS,
      `the snapshot was written whole (${recorded.parts()} parts) before the batches`,
    );

    gate.resolve();
    await within(
      waiter.until(() => seen.deltas === 3 || seen.errors.length > 0),
      WAIT_MS,
      'the deltas never came',
    );
    assert.deepEqual(
      seen.errors.map((e) => e.message),
      [],
    );
    assert.equal(seen.snapshots, 1);
    assert.deepEqual(mirror.state(), store.snapshot());
    const events = recorded.writes.filter((w) => w.event !== ':');
    assert.deepEqual(
      events.map((w) => `${w.event} ${w.id}`),
      [
        ...Array.from({ length: PARTS }, () => `snapshot-part ${snapshotSeq}`),
        `snapshot-end ${snapshotSeq}`,
        `delta ${snapshotSeq + 1}`,
        `delta ${snapshotSeq + 2}`,
        `delta ${snapshotSeq + 3}`,
      ],
    );
  });
});

/** The global fetch, with a response body that passes nothing on until `open` settles. */
function gatedFetch(open: Promise<void>): WatchFetch {
  return async (input, init) => {
    const response = await fetch(input, init);
    if (!response.body) return response;
    const upstream = response.body.getReader();
    const body = new ReadableStream<Uint8Array>(
      {
        async pull(controller) {
          await open;
          const { done, value } = await upstream.read();
          if (done) controller.close();
          else controller.enqueue(value);
        },
        cancel: (reason) => upstream.cancel(reason),
      },
      { highWaterMark: 0 },
    );
    return new Response(body, { status: response.status, headers: response.headers });
  };
}
