import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { connect, createServer } from 'node:http2';
import type { ClientHttp2Session, Http2Server } from 'node:http2';
import type { AddressInfo } from 'node:net';
import { Readable } from 'node:stream';
import { RuntimeMirror, RuntimeStateStore, createWatchHandler, watchRuntime } from '../src/index.ts';
import type { WatchFetch, WatchHandler } from '../src/index.ts';
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
