import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { request } from 'node:http';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { ManualClock, within } from '@switchyard/clock/testing';
import { WATCH_FEATURES_HEADER, WATCH_LIMITS } from '@switchyard/protocol';
import type { RuntimeOp } from '@switchyard/protocol';
import { RuntimeStateStore, WATCHER_DEFAULTS, createWatchHandler } from '../src/index.ts';
import { deltaEvent } from '../src/sse.ts';
import type { WatchHandler, WatchRuntimeOptions } from '../src/index.ts';
import { SseReader, deferred, followWatch, fileServer } from './helpers.ts';
import type { Followed } from './helpers.ts';

const server = fileServer();
const { cleanups } = server;

function serve(store: RuntimeStateStore, options: Parameters<typeof createWatchHandler>[1] = {}): WatchHandler {
  const handler = createWatchHandler(store, options);
  server.handler = handler;
  cleanups.push(
    () => handler.close(),
    () => store.close(),
  );
  return handler;
}

async function open(headers: Record<string, string> = {}): Promise<SseReader> {
  const response = await fetch(`${server.url}/watch`, { headers });
  assert.equal(response.status, 200);
  assert.equal(response.headers.get('content-type'), 'text/event-stream');
  const reader = new SseReader(response);
  cleanups.push(() => void reader.cancel());
  return reader;
}

const follow = (options: Partial<WatchRuntimeOptions> = {}): Followed =>
  followWatch(`${server.url}/watch`, cleanups, options);

describe('GET /watch', () => {
  it('starts a fresh stream with a snapshot whose id is the store seq', async () => {
    const store = new RuntimeStateStore({ seqStart: 40 });
    store.addThread('p1', 't1');
    serve(store);
    const reader = await open();
    const first = await reader.nextEvent();
    assert.equal(first.event, 'snapshot');
    assert.equal(first.id, '41');
    assert.deepEqual(JSON.parse(first.data), {
      processes: ['p1'],
      threads: [{ process: 'p1', thread: 't1' }],
      idleWeight: {},
      metadata: {},
    });
  });

  it('streams each flushed batch as a delta with the next id', async () => {
    const store = new RuntimeStateStore({ seqStart: 0 });
    serve(store);
    const reader = await open();
    await reader.nextEvent();
    store.addProcess('p1');
    store.flush();
    const delta = await reader.nextEvent();
    assert.deepEqual(delta, { event: 'delta', id: '1', data: '{"ops":[{"op":"process.add","process":"p1"}]}' });
  });

  const RESUMES: { name: string; lastEventId: string; expect: { event: string; id: string }[] }[] = [
    {
      name: 'a Last-Event-ID inside the history replays the missed deltas',
      lastEventId: '3',
      expect: [
        { event: 'delta', id: '4' },
        { event: 'delta', id: '5' },
      ],
    },
    { name: 'a Last-Event-ID older than the history falls back to a snapshot', lastEventId: '1', expect: [] },
    { name: 'a Last-Event-ID from the future falls back to a snapshot', lastEventId: '99', expect: [] },
    { name: 'a Last-Event-ID that is not a number falls back to a snapshot', lastEventId: 'x', expect: [] },
  ];
  for (const c of RESUMES) {
    it(c.name, async () => {
      const store = new RuntimeStateStore({ seqStart: 0, historyBatchesMax: 3 });
      for (const pid of ['a', 'b', 'c', 'd', 'e']) {
        store.addProcess(pid);
        store.flush();
      }
      serve(store);
      const reader = await open({ 'last-event-id': c.lastEventId });
      const expected = c.expect.length > 0 ? c.expect : [{ event: 'snapshot', id: '5' }];
      for (const want of expected) {
        const got = await reader.nextEvent();
        assert.deepEqual({ event: got.event, id: got.id }, want);
      }
    });
  }

  it('a current Last-Event-ID sends nothing until the next batch', async () => {
    const store = new RuntimeStateStore({ seqStart: 7 });
    serve(store);
    const reader = await open({ 'last-event-id': '7' });
    store.addProcess('x');
    store.flush();
    assert.deepEqual(await reader.nextEvent(), {
      event: 'delta',
      id: '8',
      data: '{"ops":[{"op":"process.add","process":"x"}]}',
    });
  });

  it('sends a full snapshot every snapshotIntervalMs and pings only when idle', async () => {
    const clock = new ManualClock();
    const store = new RuntimeStateStore({ seqStart: 0, clock });
    serve(store, { clock, snapshotIntervalMs: 1_000, keepAliveMs: 600 });
    const reader = await open();
    assert.equal((await reader.next()).event, ':', 'opens with a comment so headers go out at once');
    assert.equal((await reader.next()).event, 'snapshot');
    await clock.advance(600);
    assert.deepEqual(await reader.next(), { event: ':', id: undefined, data: 'ping' });
    store.addProcess('p');
    await clock.advance(5);
    assert.equal((await reader.next()).event, 'delta');
    await clock.advance(395);
    const periodic = await reader.next();
    assert.equal(periodic.event, 'snapshot');
    assert.equal(periodic.id, '1');
    assert.deepEqual(JSON.parse(periodic.data).processes, ['p']);
    await clock.advance(300);
    store.removeProcess('p');
    await clock.advance(5);
    assert.equal((await reader.next()).event, 'delta', 'the snapshot reset the idle timer, so no ping at 1,200 ms');
    await clock.advance(600);
    assert.deepEqual(await reader.next(), { event: ':', id: undefined, data: 'ping' });
  });

  it('pings an idle stream on time when the wall clock was set back', async () => {
    const clock = new ManualClock();
    const store = new RuntimeStateStore({ seqStart: 0, clock });
    serve(store, { clock, snapshotIntervalMs: 60_000, keepAliveMs: 600 });
    const reader = await open();
    assert.equal((await reader.next()).event, ':');
    assert.equal((await reader.next()).event, 'snapshot');
    clock.stepWall(-3_600_000); // NTP, or an operator, sets the clock back an hour
    await clock.advance(600);
    // Bounded in real time: a ping held back for the hour would never come here.
    const next = await within(reader.next(), 5_000, 'no ping after keepAliveMs');
    assert.deepEqual(next, { event: ':', id: undefined, data: 'ping' });
  });

  it('answers other methods with 405 and refuses watchers past watchersMax with 503', async () => {
    const store = new RuntimeStateStore({ seqStart: 0 });
    const handler = serve(store, { watchersMax: 1 });
    const post = await fetch(`${server.url}/watch`, { method: 'POST' });
    assert.equal(post.status, 405);
    assert.equal(post.headers.get('allow'), 'GET');
    await open();
    const second = await fetch(`${server.url}/watch`);
    assert.equal(second.status, 503);
    assert.match((await second.json()).error, /at most 1 watchers/);
    assert.equal(handler.watcherCount, 1);
  });

  it('unsubscribes when the client goes away', async () => {
    const store = new RuntimeStateStore({ seqStart: 0 });
    const handler = serve(store);
    const reader = await open();
    await reader.nextEvent();
    assert.equal(handler.watcherCount, 1);
    const gone = deferred();
    const poll = setInterval(() => handler.watcherCount === 0 && gone.resolve(), 2);
    await reader.cancel();
    await gone.promise;
    clearInterval(poll);
    assert.equal(handler.watcherCount, 0);
  });

  for (const form of ['whole', 'in parts']) {
    it(`sends a snapshot bigger than bufferBytesMax ${form}, and keeps the stream of a client that reads`, async () => {
      // About 2 MB of state: more than a socket takes at once, so most of it waits in the stream's buffer.
      const store = new RuntimeStateStore({ seqStart: 0 });
      for (let i = 0; i < 30_000; i++) store.addThread(`process-${i % 100}`, `session-0123456789abcdef-${i}`);
      const handler = serve(store, { bufferBytesMax: 64 * 1024 });
      server.handler = (req, res) => {
        // The watcher asks for parts; without the header the runtime sends the snapshot whole.
        if (form === 'whole') delete req.headers[WATCH_FEATURES_HEADER];
        handler(req, res);
      };
      const { mirror, waiter, seen } = follow();
      await waiter.until(() => seen.snapshots === 1 || seen.errors.length > 0);
      assert.deepEqual(
        seen.errors.map((e) => e.message),
        [],
      );
      store.addThread('process-0', 'one-more');
      await waiter.until(() => mirror.hasThread('process-0', 'one-more') || seen.errors.length > 0);
      assert.equal(seen.errors.length, 0);
      assert.deepEqual(mirror.state(), store.snapshot());
    });
  }

  it('drops a client that does not read once its unsent bytes pass bufferBytesMax', async () => {
    const store = new RuntimeStateStore({ seqStart: 0 });
    const handler = serve(store, { bufferBytesMax: 64 * 1024 });
    const { port } = new URL(server.url);
    const req = request({ host: '127.0.0.1', port, path: '/watch' });
    const response = deferred<IncomingMessage>();
    req.on('response', (res) => (res.pause(), response.resolve(res)));
    req.end();
    const res = await response.promise;
    cleanups.push(() => req.destroy());
    const closed = deferred();
    res.on('close', () => closed.resolve());
    // A big metadata value makes each batch large; the socket buffers fill and the stream must be cut.
    const filler = Object.fromEntries(Array.from({ length: 60 }, (_, k) => [`k${k}`, 'x'.repeat(250)]));
    for (let i = 0; i < 2_000 && handler.watcherCount > 0; i++) {
      store.setMetadata({ ...filler, n: String(i) });
      store.flush();
      await new Promise((r) => setImmediate(r));
    }
    assert.equal(handler.watcherCount, 0);
    res.resume();
    await closed.promise;
  });
});

describe('watchRuntime', () => {
  it('a change shows up at the watcher within 50 ms', async () => {
    const store = new RuntimeStateStore();
    serve(store);
    const { mirror, waiter, seen } = follow();
    await waiter.until(() => seen.snapshots === 1);
    const started = performance.now();
    store.addThread('p1', 't1');
    await waiter.until(() => mirror.hasThread('p1', 't1'));
    const elapsedMs = performance.now() - started;
    assert.ok(elapsedMs < 50, `took ${elapsedMs.toFixed(1)} ms`);
  });

  it('resumes with Last-Event-ID after a cut connection, without a new snapshot', async () => {
    const store = new RuntimeStateStore({ seqStart: 0 });
    const handler = serve(store);
    const ids: (string | undefined)[] = [];
    server.handler = (req, res) => (ids.push(req.headers['last-event-id'] as string | undefined), handler(req, res));
    const { mirror, waiter, seen, watcher } = follow();
    await waiter.until(() => seen.snapshots === 1);
    store.addProcess('a');
    await waiter.until(() => mirror.hasProcess('a'));
    server.dropConnections();
    await waiter.until(() => seen.errors.length === 1);
    store.addProcess('b');
    store.flush();
    await waiter.until(() => mirror.hasProcess('b'));
    assert.deepEqual(ids, [undefined, '1']);
    assert.equal(seen.snapshots, 1, 'the missed batch was replayed');
    assert.equal(seen.errors[0]!.code, 'upstream_unavailable');
    assert.equal(watcher.lastEventId, '2');
    assert.deepEqual(mirror.state(), store.snapshot());
  });

  const MALFORMED: { name: string; frame: string; reason: RegExp }[] = [
    {
      name: 'a delta that fails the schema',
      frame: 'event: delta\nid: 6\ndata: {"ops":[{"op":"nope"}]}\n\n',
      reason: /ops/,
    },
    { name: 'a delta that is not JSON', frame: 'event: delta\nid: 6\ndata: {oops\n\n', reason: /delta/ },
    {
      name: 'a delta whose id skips one',
      frame: 'event: delta\nid: 9\ndata: {"ops":[]}\n\n',
      reason: /does not follow/,
    },
    {
      name: 'a snapshot whose id is not a number',
      frame: 'event: snapshot\nid: abc\ndata: {"processes":[],"threads":[],"idleWeight":{},"metadata":{}}\n\n',
      reason: /bad id/,
    },
  ];
  for (const c of MALFORMED) {
    it(`reports ${c.name} and reconnects for a fresh snapshot`, async () => {
      const store = new RuntimeStateStore({ seqStart: 5 });
      store.addProcess('real');
      const handler = serve(store);
      const ids: (string | undefined)[] = [];
      server.handler = (req, res) => {
        ids.push(req.headers['last-event-id'] as string | undefined);
        if (ids.length > 1) return handler(req, res);
        const raw = res as ServerResponse;
        raw.writeHead(200, { 'content-type': 'text/event-stream' });
        raw.write('event: snapshot\nid: 5\ndata: {"processes":["old"],"threads":[],"idleWeight":{},"metadata":{}}\n\n');
        raw.write(c.frame);
      };
      const { mirror, waiter, seen } = follow();
      await waiter.until(() => seen.snapshots === 2);
      assert.equal(seen.errors[0]?.code, 'parse_error');
      assert.match(seen.errors[0]!.message, c.reason);
      assert.deepEqual(ids, [undefined, undefined], 'the reconnect asks for a snapshot, not a resume');
      assert.deepEqual(mirror.state().processes, ['real']);
    });
  }

  it('waits reconnectMs on its clock before reconnecting after a refused stream', async () => {
    const store = new RuntimeStateStore({ seqStart: 0 });
    const handler = serve(store);
    let requests = 0;
    server.handler = (req, res) => (++requests === 1 ? res.writeHead(503).end() : handler(req, res));
    const clock = new ManualClock();
    const { waiter, seen } = follow({ clock, reconnectMs: 2_000 });
    await waiter.until(() => seen.errors.length === 1);
    assert.match(seen.errors[0]!.message, /503/);
    await clock.advance(1_999);
    assert.equal(requests, 1);
    await clock.advance(1);
    await waiter.until(() => seen.snapshots === 1);
    assert.equal(requests, 2);
  });

  it('drops a stream that brings no byte for idleTimeoutMs on its clock and resumes it with Last-Event-ID', async () => {
    const store = new RuntimeStateStore({ seqStart: 0 });
    const handler = serve(store);
    const ids: (string | undefined)[] = [];
    server.handler = (req, res) => {
      ids.push(req.headers['last-event-id'] as string | undefined);
      if (ids.length > 1) return handler(req, res);
      // A stream that opens with the snapshot and then falls silent, not even a ping, its connection up.
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write('event: snapshot\nid: 0\ndata: {"processes":[],"threads":[],"idleWeight":{},"metadata":{}}\n\n');
    };
    const clock = new ManualClock();
    const { mirror, waiter, seen } = follow({ clock, idleTimeoutMs: 45_000 });
    await waiter.until(() => seen.snapshots === 1);
    await clock.advance(44_999);
    assert.equal(seen.errors.length, 0, 'not before idleTimeoutMs');
    await clock.advance(1);
    assert.equal(seen.errors.length, 1, 'dropped at idleTimeoutMs');
    assert.equal(seen.errors[0]!.code, 'upstream_unavailable');
    assert.match(seen.errors[0]!.message, /no byte for 45000 ms/);
    store.addProcess('a');
    store.flush();
    await clock.advance(0);
    await waiter.until(() => mirror.hasProcess('a'));
    assert.deepEqual(ids, [undefined, '0'], 'the reconnect resumes after the last event');
    assert.equal(seen.snapshots, 1, 'the missed batch was replayed, no new snapshot');
  });

  it('drops a stalled stream at idleTimeoutMs when the wall clock was set back meanwhile', async () => {
    let requests = 0;
    server.handler = (_req, res) => {
      if (++requests > 1) return void res.writeHead(503).end();
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write('event: snapshot\nid: 0\ndata: {"processes":[],"threads":[],"idleWeight":{},"metadata":{}}\n\n');
    };
    const clock = new ManualClock();
    const { waiter, seen } = follow({ clock, idleTimeoutMs: 45_000, reconnectMs: 60_000 });
    await waiter.until(() => seen.snapshots === 1);
    clock.stepWall(-3_600_000);
    await clock.advance(45_000);
    assert.equal(seen.errors.length, 1, 'dropped at idleTimeoutMs, not an hour later');
    assert.match(seen.errors[0]!.message, /no byte for 45000 ms/);
  });

  for (const bad of [{ snapshotIntervalMs: 0 }, { keepAliveMs: -1 }, { bufferBytesMax: Number.NaN }]) {
    it(`refuses ${Object.entries(bad).map(([k, v]) => `${k}=${v}`)[0]} at creation`, () => {
      const store = new RuntimeStateStore();
      assert.throws(() => createWatchHandler(store, bad), /must be at least 1/);
      store.close();
    });
  }

  it('answers 503 once the store is closed', async () => {
    const store = new RuntimeStateStore({ seqStart: 0 });
    serve(store);
    store.close();
    const response = await fetch(`${server.url}/watch`);
    assert.equal(response.status, 503);
    await response.arrayBuffer();
  });

  it('close() is idempotent and no callback runs afterwards', async () => {
    const store = new RuntimeStateStore({ seqStart: 0 });
    serve(store);
    const { waiter, seen, watcher } = follow();
    await waiter.until(() => seen.snapshots === 1);
    // A second watcher of the same stream: once it has the next batch, the closed one would have had it too.
    const control = follow();
    await control.waiter.until(() => control.seen.snapshots === 1);
    watcher.close();
    watcher.close();
    assert.equal(watcher.connected, false);
    store.addProcess('late');
    store.flush();
    await control.waiter.until(() => control.mirror.hasProcess('late'));
    await new Promise((r) => setTimeout(r, 20));
    assert.equal(seen.deltas, 0);
    assert.equal(seen.errors.length, 0);
  });

  it('takes the largest delta the protocol admits whole by default', () => {
    const id = (c: string): string => c.repeat(128);
    const ops: RuntimeOp[] = Array.from({ length: WATCH_LIMITS.deltaOpsMax - 2 }, () => ({
      op: 'thread.remove',
      process: id('p'),
      thread: id('t'),
    }));
    const keys = (n: number): string[] => Array.from({ length: n }, (_, i) => `${i}`.padStart(63, 'k'));
    ops.push({ op: 'weight', idleWeight: Object.fromEntries(keys(16).map((k) => [k, 1e12 - 0.5])) });
    ops.push({ op: 'metadata', metadata: Object.fromEntries(keys(64).map((k) => [k, '\u0001'.repeat(256)])) });
    assert.ok(deltaEvent(Number.MAX_SAFE_INTEGER, ops).length < WATCHER_DEFAULTS.eventCharsMax);
  });

  it('closes a stream whose event passes eventCharsMax, and reconnects only after oversizeReconnectMs', async () => {
    // A runtime that never ends its line: unbounded, the parser would buffer it all (eventsource's own
    // default is 100 M characters), again on every reconnect.
    const eventCharsMax = 256 * 1024;
    // Kernel socket buffers take some bytes the watcher never read; far below the cap, far above the limit.
    const slackBytes = 8 * 1024 * 1024;
    const capBytes = 64 * 1024 * 1024;
    const endless = endlessLine(capBytes);
    server.handler = endless.handler;
    const clock = new ManualClock();
    const { waiter, seen } = follow({ clock, eventCharsMax, reconnectMs: 0, oversizeReconnectMs: 30_000 });
    const outcome = await endless.outcome;
    assert.equal(outcome.closed, true, `the stream was still open after ${outcome.bytes} bytes`);
    assert.ok(outcome.bytes < eventCharsMax + slackBytes, `${outcome.bytes} bytes sent before the close`);
    await waiter.until(() => seen.errors.length === 1);
    assert.equal(seen.errors[0]!.code, 'body_too_large');
    assert.match(seen.errors[0]!.message, /watch event over 262144 characters/);
    await clock.advance(29_999);
    assert.equal(endless.requests(), 1, 'no reconnect before oversizeReconnectMs');
    await clock.advance(1);
    await endless.reconnected;
  });

  it('holds no timer once closed after a stream that ended, whatever retry it set', async () => {
    // eventsource arms a reconnect timer for the stream's `retry:` after its error listeners have
    // run; a dropped stream's source must not keep it, nor the process, for that long (here 30 s).
    let requests = 0;
    server.handler = (_req, res) => {
      requests++;
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.end('retry: 30000\n\n');
    };
    const timersBefore = activeTimers();
    const { waiter, seen, watcher } = follow({ clock: new ManualClock() });
    await waiter.until(() => seen.errors.length === 1);
    assert.match(seen.errors[0]!.message, /stream ended/);
    watcher.close();
    await new Promise((resolve) => setImmediate(resolve));
    assert.equal(activeTimers(), timersBefore, 'no timer outlives the closed watcher');
    assert.equal(requests, 1, 'the watcher reconnects on its own clock only');
  });
});

/** Timers keeping the event loop alive. */
function activeTimers(): number {
  return process.getActiveResourcesInfo().filter((kind) => kind === 'Timeout').length;
}

/**
 * A fake runtime whose `/watch` streams one `data:` line that never ends, with backpressure, until
 * the client closes the stream or `capBytes` are out; `outcome` tells which, and how many bytes were
 * sent. Later requests get a stream that stays silent.
 */
function endlessLine(capBytes: number) {
  let requests = 0;
  const result = deferred<{ closed: boolean; bytes: number }>();
  const reconnected = deferred();
  const chunk = 'x'.repeat(16 * 1024);
  const handler = (_req: IncomingMessage, res: ServerResponse): void => {
    if (++requests > 1)
      return void (reconnected.resolve(), res.writeHead(200, { 'content-type': 'text/event-stream' }));
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    res.write('event: snapshot\nid: 1\ndata: ');
    let bytes = 0;
    let closed = false;
    res.on('close', () => {
      closed = true;
      result.resolve({ closed: true, bytes });
    });
    const pump = (): void => {
      while (!closed) {
        if (bytes >= capBytes) return result.resolve({ closed: false, bytes });
        bytes += chunk.length;
        if (!res.write(chunk)) return void res.once('drain', pump);
      }
    };
    pump();
  };
  return { handler, outcome: result.promise, reconnected: reconnected.promise, requests: () => requests };
}
