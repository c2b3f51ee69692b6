import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { connect, constants as http2Constants, createServer } from 'node:http2';
import type { ClientHttp2Session, Http2Server } from 'node:http2';
import type { AddressInfo } from 'node:net';
import { Readable } from 'node:stream';
import { RuntimeMirror, RuntimeStateStore, createWatchHandler, watchRuntime } from '../src/index.ts';
import type { WatchFetch, WatchHandler } from '../src/index.ts';
import { within } from '@switchyard/clock/testing';
import { Waiter } from './helpers.ts';

/**
 * The least fetch that eventsource needs, over one HTTP/2 session: the shape
 * the tunnel's fetch has, without the tunnel.
 */
function http2Fetch(session: ClientHttp2Session): WatchFetch {
  return (input, init) =>
    new Promise((resolve, reject) => {
      const url = new URL(String(input));
      const headers = Object.fromEntries(Object.entries((init.headers ?? {}) as Record<string, string>));
      const stream = session.request({ ':method': 'GET', ':path': url.pathname + url.search, ...headers });
      (init.signal as AbortSignal | undefined)?.addEventListener('abort', () => stream.close());
      stream.on('error', reject);
      stream.on('response', (head) => {
        const responseHeaders = new Headers();
        for (const [k, v] of Object.entries(head)) if (!k.startsWith(':')) responseHeaders.set(k, String(v));
        const body = Readable.toWeb(stream) as ReadableStream<Uint8Array>;
        resolve(new Response(body, { status: Number(head[':status']), headers: responseHeaders }));
      });
    });
}

describe('GET /watch over HTTP/2 compat objects', () => {
  let server: Http2Server;
  let session: ClientHttp2Session;
  let handler: WatchHandler;
  const store = new RuntimeStateStore({ seqStart: 0 });

  before(async () => {
    handler = createWatchHandler(store);
    server = createServer(handler);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    session = connect(`http://127.0.0.1:${(server.address() as AddressInfo).port}`);
  });
  after(async () => {
    handler.close();
    store.close();
    session.close();
    await new Promise((resolve) => server.close(resolve));
  });

  it('serves a snapshot then deltas that rebuild the state', async () => {
    store.addThread('p1', 't1');
    const mirror = new RuntimeMirror();
    const waiter = new Waiter();
    const errors: unknown[] = [];
    const watcher = watchRuntime({
      url: 'http://runtime/watch',
      fetch: http2Fetch(session),
      onSnapshot: (s) => (mirror.applySnapshot(s), waiter.poke()),
      onOps: (ops) => (mirror.applyOps(ops), waiter.poke()),
      onError: (e) => errors.push(e),
    });
    try {
      await waiter.until(() => mirror.hasThread('p1', 't1'));
      store.removeThread('p1', 't1');
      store.addThread('p2', 't2');
      store.setIdleWeight({ sandboxes: 4 });
      await waiter.until(() => mirror.hasThread('p2', 't2'));
      assert.deepEqual(mirror.state(), store.snapshot());
      assert.equal(watcher.lastEventId, '2');
      assert.equal(handler.watcherCount, 1);
      assert.deepEqual(errors, []);
    } finally {
      watcher.close();
    }
  });
});

describe('GET /watch, a snapshot in parts over HTTP/2 compat objects', () => {
  let server: Http2Server;
  let session: ClientHttp2Session;
  let handler: WatchHandler;
  const store = new RuntimeStateStore({ seqStart: 0 });

  before(async () => {
    // Three parts of about 1 MB each, far more than the stream window: each waits for the 'drain' of the last.
    for (let i = 0; i < 25_000; i++) store.addThread(`p-${i % 100}`, `t-${i}-`.padEnd(100, 't'));
    store.flush();
    handler = createWatchHandler(store);
    server = createServer((req, res) => {
      handler(req, res);
      // The handler wrote the first part only: this batch is held until the snapshot's end.
      store.addThread('late', 'one');
      store.flush();
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    session = connect(`http://127.0.0.1:${(server.address() as AddressInfo).port}`);
  });
  after(async () => {
    handler.close();
    store.close();
    session.close();
    await new Promise((resolve) => server.close(resolve));
  });

  it('writes every part as the stream drains, then the batch held meanwhile', async () => {
    const mirror = new RuntimeMirror();
    const waiter = new Waiter();
    const errors: unknown[] = [];
    const watcher = watchRuntime({
      url: 'http://runtime/watch',
      fetch: http2Fetch(session),
      onSnapshot: (s) => (mirror.applySnapshot(s), waiter.poke()),
      onOps: (ops) => (mirror.applyOps(ops), waiter.poke()),
      onError: (e) => (errors.push(e), waiter.poke()),
    });
    try {
      const synced = waiter.until(() => mirror.hasThread('late', 'one') || errors.length > 0);
      await within(synced, 60_000, 'the snapshot and the batch never came');
      assert.deepEqual(errors, []);
      assert.deepEqual(mirror.state(), store.snapshot());
    } finally {
      watcher.close();
    }
  });
});

describe('GET /watch resumed over HTTP/2 after many changes', () => {
  let server: Http2Server;
  let session: ClientHttp2Session;
  const stores: RuntimeStateStore[] = [];
  const handlers: WatchHandler[] = [];

  before(async () => {
    server = createServer((req, res) => handlers.at(-1)!(req, res));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    session = connect(`http://127.0.0.1:${(server.address() as AddressInfo).port}`);
  });
  after(async () => {
    for (const handler of handlers) handler.close();
    for (const store of stores) store.close();
    session.close();
    await new Promise((resolve) => server.close(resolve));
  });

  /** A store whose batches after `seq` 0 are `build`'s, served by a fresh handler with the default limits. */
  function serveBuilt(build: (store: RuntimeStateStore) => void): RuntimeStateStore {
    const store = new RuntimeStateStore({ seqStart: 0, historyBatchesMax: 1_000 });
    build(store);
    stores.push(store);
    handlers.push(createWatchHandler(store));
    return store;
  }

  /** The names and ids of the events of a stream resumed after `lastEventId`, up to the first snapshot or its end. */
  function resume(lastEventId: string): Promise<{ events: string[]; cut: boolean }> {
    return new Promise((resolve) => {
      const stream = session.request({ ':path': '/watch', 'last-event-id': lastEventId });
      const events: string[] = [];
      let text = '';
      const done = (cut: boolean): void => (stream.close(), resolve({ events, cut }));
      stream.setEncoding('utf8');
      stream.on('error', () => done(true));
      stream.on('close', () => done(stream.rstCode !== http2Constants.NGHTTP2_NO_ERROR));
      stream.on('data', (chunk: string) => {
        text += chunk;
        for (let end = text.indexOf('\n\n'); end >= 0; end = text.indexOf('\n\n')) {
          const frame = text.slice(0, end);
          text = text.slice(end + 2);
          const name = /^event: (.*)$/m.exec(frame)?.[1];
          if (name) events.push(`${name} ${/^id: (.*)$/m.exec(frame)?.[1]}`);
          if (name === 'snapshot') return done(false);
        }
      });
    });
  }

  it('sends a snapshot instead of a replay larger than bufferBytesMax', async () => {
    // 40 batches of 200 processes with 120-character ids: about 1.3 MB of missed deltas, far more
    // than the HTTP/2 stream window lets out at once.
    const store = serveBuilt((s) => {
      for (let batch = 0; batch < 40; batch++) {
        for (let i = 0; i < 200; i++) s.addProcess(`${batch}-${i}-`.padEnd(120, 'p'));
        s.flush();
      }
    });
    assert.deepEqual(await resume('0'), { events: [`snapshot ${store.seq}`], cut: false });
  });

  it('sends a snapshot instead of a replay larger than the snapshot', async () => {
    // A process that came and went 300 times: the replay is 600 ops, the state one process.
    const store = serveBuilt((s) => {
      s.addProcess('stays');
      s.flush();
      for (let i = 0; i < 300; i++) {
        s.addProcess('flaps');
        s.flush();
        s.removeProcess('flaps');
        s.flush();
      }
    });
    assert.deepEqual(await resume('1'), { events: [`snapshot ${store.seq}`], cut: false });
  });
});
