// Snapshots in parts: a runtime whose state is bigger than one /watch event
// (WATCH_LIMITS.eventCharsMax) syncs to a consumer that asks for parts, and
// consumers and runtimes of either kind keep working with each other.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { ManualClock, within } from '@switchyard/clock/testing';
import {
  RUNTIME_LIMITS,
  WATCH_EVENTS,
  WATCH_FEATURES,
  WATCH_FEATURES_HEADER,
  WATCH_LIMITS,
} from '@switchyard/protocol';
import type { WatchSnapshot } from '@switchyard/protocol';
import { RuntimeStateStore, createWatchHandler } from '../src/index.ts';
import { SnapshotAssembler } from '../src/snapshot-parts.ts';
import { snapshotEvent } from '../src/sse.ts';
import type { WatchHandler, WatchRuntimeOptions } from '../src/index.ts';
import { SseReader, deferred, followWatch, fileServer } from './helpers.ts';
import type { Followed, SseEvent } from './helpers.ts';

const server = fileServer();
const { cleanups } = server;

const ASKS_FOR_PARTS = { [WATCH_FEATURES_HEADER]: WATCH_FEATURES.snapshotParts };
const PART_ENTRIES_MAX = WATCH_LIMITS.snapshotPartEntriesMax;
/** Bounds every real-time wait, so that a fault fails the test instead of hanging it. */
const WAIT_MS = 20_000;

function serve(store: RuntimeStateStore): WatchHandler {
  const handler = createWatchHandler(store);
  server.handler = handler;
  cleanups.push(
    () => handler.close(),
    () => store.close(),
  );
  return handler;
}

const follow = (options: Partial<WatchRuntimeOptions> = {}): Followed =>
  followWatch(`${server.url}/watch`, cleanups, options);

/** A store holding `threads` threads over 100 processes, ids of `idChars` characters. */
function storeWith(threads: number, idChars = 16): RuntimeStateStore {
  const store = new RuntimeStateStore({ seqStart: 0, historyBatchesMax: 1 });
  const id = (prefix: string, i: number): string => `${prefix}-${i}-`.padEnd(idChars, 'x');
  for (let i = 0; i < threads; i++) store.addThread(id('p', i % 100), id('t', i));
  store.flush();
  return store;
}

/** The events of one stream up to its snapshot's end (a whole snapshot, or a `snapshot-end`). */
async function snapshotEvents(headers: Record<string, string>): Promise<SseEvent[]> {
  const response = await fetch(`${server.url}/watch`, { headers });
  const reader = new SseReader(response);
  cleanups.push(() => void reader.cancel());
  const events: SseEvent[] = [];
  for (let i = 0; i < 1_000; i++) {
    const event = await reader.nextEvent();
    events.push(event);
    if (event.event === WATCH_EVENTS.snapshot || event.event === WATCH_EVENTS.snapshotEnd) return events;
  }
  throw new Error('no snapshot end within 1,000 events');
}

/**
 * Has `res` write only its first `parts` snapshot parts, then end its connection, as a network that
 * fails half-way through a snapshot; what the handler writes after is dropped.
 */
function cutAfterParts(res: ServerResponse, parts: number): void {
  const write = res.write.bind(res) as (chunk: string) => boolean;
  let written = 0;
  res.write = ((chunk: string) => {
    if (written >= parts) return true;
    const ok = write(chunk);
    if (chunk.startsWith(`event: ${WATCH_EVENTS.snapshotPart}\n`) && ++written === parts) res.socket?.end();
    return ok;
  }) as typeof res.write;
}

describe('GET /watch, snapshots in parts', () => {
  const CASES: { name: string; headers: Record<string, string>; threads: number; events: string[] }[] = [
    {
      name: 'a consumer that asks gets a big snapshot in parts, then their end',
      headers: ASKS_FOR_PARTS,
      threads: 2 * PART_ENTRIES_MAX,
      events: ['snapshot-part', 'snapshot-part', 'snapshot-part', 'snapshot-end'],
    },
    {
      name: 'a consumer that does not ask (an earlier release) gets a big snapshot whole',
      headers: {},
      threads: 2 * PART_ENTRIES_MAX,
      events: ['snapshot'],
    },
    {
      name: 'a consumer that lists other features only gets a big snapshot whole',
      headers: { [WATCH_FEATURES_HEADER]: 'later-feature, snapshot-parts-v2' },
      threads: 2 * PART_ENTRIES_MAX,
      events: ['snapshot'],
    },
    {
      name: 'a consumer that asks gets a snapshot that fits in one part whole',
      headers: ASKS_FOR_PARTS,
      threads: PART_ENTRIES_MAX - 100,
      events: ['snapshot'],
    },
  ];
  for (const c of CASES) {
    it(c.name, async () => {
      const store = storeWith(c.threads);
      store.setIdleWeight({ sandboxes: 3 });
      store.flush();
      serve(store);
      const events = await snapshotEvents(c.headers);
      assert.deepEqual(
        events.map((e) => e.event),
        c.events,
      );
      assert.ok(
        events.every((e) => e.id === String(store.seq)),
        'every event carries the snapshot id',
      );
      const data = events.map((e) => JSON.parse(e.data));
      const rebuilt =
        events.length === 1
          ? data[0]
          : {
              processes: data.slice(0, -1).flatMap((d) => d.processes),
              threads: data.slice(0, -1).flatMap((d) => d.threads),
              idleWeight: data.at(-1).idleWeight,
              metadata: data.at(-1).metadata,
            };
      assert.deepEqual(rebuilt, store.snapshot());
      for (const [i, d] of data.slice(0, -1).entries()) {
        assert.equal(d.part, i);
        assert.ok(d.processes.length + d.threads.length <= PART_ENTRIES_MAX);
      }
      if (events.length > 1) assert.equal(data.at(-1).parts, events.length - 1);
    });
  }
});

describe('watchRuntime, snapshots in parts', () => {
  it('syncs a state whose snapshot passes eventCharsMax, over real HTTP, then follows deltas', async () => {
    // 130,000 threads named by 128-character ids: about 36 M characters, more than one event takes.
    const started = performance.now();
    const store = storeWith(130_000, 128);
    const whole = snapshotEvent(store.seq, store.snapshot()).length;
    assert.ok(whole > WATCH_LIMITS.eventCharsMax, `the snapshot takes ${whole} characters`);
    serve(store);
    const built = performance.now();
    const { mirror, waiter, seen, watcher } = follow();
    await waiter.until(() => seen.snapshots === 1 || seen.errors.length > 0);
    const synced = performance.now();
    assert.deepEqual(
      seen.errors.map((e) => e.message),
      [],
    );
    assert.equal(mirror.threadCount, 130_000);
    assert.equal(watcher.lastEventId, String(store.seq));
    store.removeProcess(mirror.state().processes[0]!);
    store.addThread('late', 'one-more');
    await waiter.until(() => mirror.hasThread('late', 'one-more') || seen.errors.length > 0);
    assert.equal(seen.errors.length, 0);
    assert.equal(seen.deltas, 1);
    assert.deepEqual(mirror.state(), store.snapshot());
    const ms = (from: number, to: number): string => `${(to - from).toFixed(0)} ms`;
    console.log(`state of ${whole} characters: built in ${ms(started, built)}, synced in ${ms(built, synced)}`);
  });

  it('keeps its state when a stream is cut within a snapshot in parts, and resumes to the right one', async () => {
    const store = storeWith(2 * PART_ENTRIES_MAX + 5_000);
    const handler = serve(store);
    const ids: (string | undefined)[] = [];
    let cutParts = 0;
    server.handler = (req: IncomingMessage, res: ServerResponse) => {
      ids.push(req.headers['last-event-id'] as string | undefined);
      if (cutParts > 0) cutAfterParts(res, cutParts);
      handler(req, res);
    };
    const clock = new ManualClock();
    const { mirror, waiter, seen, watcher } = follow({ clock, reconnectMs: 1_000 });
    await waiter.until(() => seen.snapshots === 1);
    const first: WatchSnapshot = store.snapshot();
    const firstId = String(store.seq);
    assert.deepEqual(mirror.state(), first);
    server.dropConnections();
    await waiter.until(() => seen.errors.length === 1);

    // Two batches while it is away, and a history of one: the resume needs a snapshot.
    for (const pid of first.processes.slice(0, 10)) store.removeProcess(pid);
    store.flush();
    store.addProcess('second');
    store.flush();
    cutParts = 2;
    await clock.advance(1_000);
    await waiter.until(() => seen.errors.length === 2);
    assert.equal(seen.errors[1]!.code, 'upstream_unavailable', 'the stream was cut, not found malformed');
    assert.equal(seen.snapshots, 1, 'no snapshot from the parts of a cut stream');
    assert.deepEqual(mirror.state(), first, 'the state before the cut snapshot stands');
    assert.equal(watcher.lastEventId, firstId, 'the resume point is the last snapshot taken');

    // A different snapshot next: had the watcher kept the cut one's parts, the two would mix.
    for (const pid of first.processes.slice(10, 20)) store.removeProcess(pid);
    store.addThread('third', 't');
    store.flush();
    cutParts = 0;
    await clock.advance(1_000);
    await waiter.until(() => seen.snapshots === 2 || seen.errors.length > 2);
    assert.equal(seen.errors.length, 2);
    assert.deepEqual(ids, [undefined, firstId, firstId]);
    assert.deepEqual(mirror.state(), store.snapshot());
    assert.equal(mirror.hasProcess('second'), true);

    store.addProcess('after');
    await waiter.until(() => mirror.hasProcess('after'));
    assert.deepEqual(mirror.state(), store.snapshot());
  });

  it('takes a big snapshot whole from a runtime that sends no parts (an earlier release)', async () => {
    const store = storeWith(2 * PART_ENTRIES_MAX);
    const handler = serve(store);
    const asked: unknown[] = [];
    server.handler = (req, res) => {
      asked.push(req.headers[WATCH_FEATURES_HEADER]);
      // A runtime that does not know the header: the same as one that never got it.
      delete req.headers[WATCH_FEATURES_HEADER];
      handler(req, res);
    };
    const { mirror, waiter, seen } = follow();
    await waiter.until(() => seen.snapshots === 1 || seen.errors.length > 0);
    assert.deepEqual(asked, [WATCH_FEATURES.snapshotParts], 'the watcher asked for parts');
    assert.equal(seen.errors.length, 0);
    assert.deepEqual(mirror.state(), store.snapshot());
    store.addProcess('later');
    await waiter.until(() => mirror.hasProcess('later'));
    assert.deepEqual(mirror.state(), store.snapshot());
  });

  it('refuses parts past its limits, closes the stream and asks again after oversizeReconnectMs', async () => {
    const clock = new ManualClock();
    const streams: ServerResponse[] = [];
    const second = deferred();
    const closed = deferred();
    server.handler = (_req, res) => {
      if (streams.push(res) > 1) return second.resolve();
      res.on('close', () => closed.resolve());
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      // Parts of new threads that never end: more than the watcher takes, and it must not wait for an end.
      for (let part = 0; part < 3; part++) {
        const threads = Array.from({ length: PART_ENTRIES_MAX }, (_, i) => ({ process: 'p', thread: `t${part}-${i}` }));
        res.write(`event: snapshot-part\nid: 5\ndata: ${JSON.stringify({ part, processes: [], threads })}\n\n`);
      }
    };
    const { waiter, seen } = follow({ clock, threadsMax: 15_000, oversizeReconnectMs: 30_000 });
    await within(
      waiter.until(() => seen.errors.length > 0),
      WAIT_MS,
      'the parts were never refused',
    );
    assert.equal(seen.errors[0]!.code, 'capacity_exhausted');
    assert.match(seen.errors[0]!.message, /more than 15000 threads/);
    await within(closed.promise, WAIT_MS, 'the stream stayed open');
    await clock.advance(29_999);
    assert.equal(streams.length, 1, 'asked again before oversizeReconnectMs');
    await clock.advance(1);
    await within(second.promise, WAIT_MS, 'never asked again');
    assert.equal(seen.snapshots, 0);
  });

  const part = (n: number, id = 5, pid = `p${n}`): string =>
    `event: snapshot-part\nid: ${id}\ndata: ${JSON.stringify({ part: n, processes: [pid], threads: [] })}\n\n`;
  const end = (parts: number, id = 5): string =>
    `event: snapshot-end\nid: ${id}\ndata: ${JSON.stringify({ parts, idleWeight: {}, metadata: {} })}\n\n`;
  const MALFORMED: { name: string; frames: string; reason: RegExp }[] = [
    { name: 'a part out of order', frames: part(0) + part(2), reason: /part 2 where part 1 was due/ },
    { name: 'a part with the id of another snapshot', frames: part(0) + part(1, 6), reason: /id 6 within/ },
    { name: 'a part that lists nothing', frames: part(0) + part(1).replace('["p1"]', '[]'), reason: /1 to/ },
    { name: 'an end with no part before it', frames: end(1), reason: /no part before it/ },
    { name: 'an end that counts other parts', frames: part(0) + part(1) + end(3), reason: /3 parts announced/ },
    {
      name: 'a delta among the parts',
      frames: part(0) + 'event: delta\nid: 6\ndata: {"ops":[]}\n\n',
      reason: /delta event: within a snapshot sent in parts/,
    },
  ];
  for (const c of MALFORMED) {
    it(`reports ${c.name}, keeps its state and reconnects for a fresh snapshot`, async () => {
      const store = new RuntimeStateStore({ seqStart: 5 });
      store.addProcess('real');
      const handler = serve(store);
      let requests = 0;
      server.handler = (req, res) => {
        if (++requests > 1) return handler(req, res);
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        res.write('event: snapshot\nid: 4\ndata: {"processes":["old"],"threads":[],"idleWeight":{},"metadata":{}}\n\n');
        res.write(c.frames);
      };
      const states: string[][] = [];
      const { mirror, waiter, seen } = follow({
        onSnapshot: (s) => (seen.snapshots++, mirror.applySnapshot(s), states.push(s.processes), waiter.poke()),
      });
      await waiter.until(() => seen.snapshots === 2);
      assert.equal(seen.errors[0]?.code, 'parse_error');
      assert.match(seen.errors[0]!.message, c.reason);
      assert.deepEqual(states, [['old'], ['real']], 'no state made of the faulty parts');
      assert.equal(requests, 2);
    });
  }
});

describe('SnapshotAssembler', () => {
  const ids = (prefix: string, from: number): string[] =>
    Array.from({ length: PART_ENTRIES_MAX }, (_, i) => `${prefix}${from + i}`);
  // Each part is valid on its own; only what they make together can pass the limits.
  const LIMITS = { processesMax: 25_000, threadsMax: 25_000 };
  const CASES = [
    {
      what: 'processes',
      part: (n: number) => ({ processes: ids('p', n * PART_ENTRIES_MAX), threads: [] }),
      reason: 'more than 25000 processes',
    },
    {
      what: 'threads',
      part: (n: number) => ({
        processes: [],
        threads: ids('t', n * PART_ENTRIES_MAX).map((thread) => ({ process: 'p', thread })),
      }),
      reason: 'more than 25000 threads',
    },
    {
      what: 'processes its threads name',
      part: (n: number) => ({
        processes: [],
        threads: ids('p', n * PART_ENTRIES_MAX).map((process) => ({ process, thread: 't' })),
      }),
      reason: 'more than 25000 processes',
    },
  ];
  for (const c of CASES) {
    it(`refuses the part that takes a snapshot past its limit of ${c.what}`, () => {
      const assembler = new SnapshotAssembler(LIMITS);
      for (const part of [0, 1]) assert.equal(assembler.add(7, { part, ...c.part(part) }), undefined);
      assert.deepEqual(assembler.add(7, { part: 2, ...c.part(2) }), { overLimits: true, reason: c.reason });
      assert.equal(assembler.pending, false, 'what it held is dropped');
    });
  }

  it('holds the state its parts make, not their lists: parts that repeat take no more room', () => {
    // Past the limits of a whole snapshot as lists, and 10,000 threads as a state.
    const assembler = new SnapshotAssembler();
    const threads = ids('t', 0).map((thread) => ({ process: 'p', thread }));
    const parts = RUNTIME_LIMITS.threadsMax / PART_ENTRIES_MAX + 1;
    for (let part = 0; part < parts; part++) {
      const refused = assembler.add(7, { part, processes: [], threads });
      assert.equal(refused, undefined, `part ${part} refused`);
    }
    const assembled = assembler.finish(7, { parts, idleWeight: {}, metadata: {} });
    assert.ok(assembled.ok);
    assert.equal(assembled.snapshot.threads.length, PART_ENTRIES_MAX);
    assert.deepEqual(assembled.snapshot.processes, ['p']);
  });
});
