import { after, afterEach, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { once } from 'node:events';
import http from 'node:http';
import http2 from 'node:http2';
import type { Socket } from 'node:net';
import { randomBytes } from 'node:crypto';
import WebSocket from 'ws';
import { H2_TUNING, TUNNEL_UPGRADE } from '../src/index.ts';
import type { Tunnel, TunnelDialer } from '../src/index.ts';
import { TOKEN, encodeInfo, readStream, runtimeInfo, startRuntime, startScheduler } from './helpers.ts';
import type { Scheduler } from './helpers.ts';

const MiB = 1024 * 1024;
const FLOOD_BYTES = 256 * MiB;
const CHUNK = Buffer.alloc(64 * 1024, 7);

interface Flood {
  offered: number;
  waiting: boolean;
  done: boolean;
}

for (const transport of ['http2', 'websocket'] as const) {
  describe(`tunnel streams (${transport})`, () => {
    let scheduler: Scheduler;
    let dialer: TunnelDialer;
    let tunnel: Tunnel;
    const flood: Flood = { offered: 0, waiting: false, done: false };
    const closedOnRuntime: { path: string; rstCode: number }[] = [];

    before(async () => {
      scheduler = await startScheduler();
      ({ dialer, tunnel } = await startRuntime(
        scheduler,
        'rt-s',
        (req, res) => {
          if (req.url === '/flood') return void floodResponse(res, flood);
          if (req.url === '/drip') {
            res.writeHead(200, { 'content-type': 'text/event-stream' });
            res.write('data: first\n\n');
            res.once('close', () => closedOnRuntime.push({ path: req.url, rstCode: res.stream.rstCode ?? -1 }));
            return;
          }
          res.end(`ok ${req.url}`);
        },
        { transport },
      ));
    });
    after(async () => {
      void dialer.close();
      await scheduler.close();
    });

    it('carries 1,000 concurrent streams on one tunnel', async () => {
      const replies = await Promise.all(
        Array.from({ length: 1000 }, (_, i) => readStream(tunnel.request({ ':path': `/n/${i}` }))),
      );
      replies.forEach((r, i) => assert.deepEqual(r, { status: 200, body: `ok /n/${i}` }));
    });

    it('holds a paused reader to its window while other streams flow and memory stays flat', async (t) => {
      const stream = tunnel.request({ ':path': '/flood' });
      await once(stream, 'response');
      const rssBefore = process.memoryUsage().rss;
      // Nobody reads `stream`: the runtime may only send what the stream window and buffers allow.
      // Stalled = the writer waits on backpressure and its offer has not moved for a while (bounded wait).
      let stalledAt = -1;
      for (let stable = 0, i = 0; stable < 3 && i < 100; i++) {
        await new Promise((r) => setTimeout(r, 100));
        stable = flood.waiting && flood.offered === stalledAt ? stable + 1 : 0;
        stalledAt = flood.offered;
      }
      assert.ok(flood.waiting, 'the writer stalls on backpressure');
      const windowBound = 4 * H2_TUNING.streamWindowBytes;
      assert.ok(stalledAt <= windowBound, `offered ${stalledAt} bytes to a paused reader`);
      const others = await Promise.all(
        Array.from({ length: 50 }, (_, i) => readStream(tunnel.request({ ':path': `/o/${i}` }))),
      );
      assert.ok(others.every((r) => r.status === 200));
      assert.ok(flood.offered <= windowBound, `offer grew to ${flood.offered} bytes while other streams ran`);
      const rssPausedGrowth = process.memoryUsage().rss - rssBefore;
      assert.ok(rssPausedGrowth < 8 * H2_TUNING.streamWindowBytes, `RSS grew ${rssPausedGrowth} bytes while paused`);

      // Resume: the whole offer arrives and the writer's loop ends by itself.
      let received = 0;
      let rssMax = 0;
      for await (const chunk of stream) {
        received += (chunk as Buffer).length;
        if (received % (16 * MiB) < CHUNK.length) rssMax = Math.max(rssMax, process.memoryUsage().rss);
      }
      t.diagnostic(`stalled at ${stalledAt} B; RSS +${rssPausedGrowth} B paused, +${rssMax - rssBefore} B streaming`);
      assert.equal(received, FLOOD_BYTES);
      assert.equal(flood.done, true);
      // Reading allocates garbage the GC reclaims lazily; the bound only proves the offer is never held whole.
      assert.ok(rssMax - rssBefore < FLOOD_BYTES / 2, `RSS grew ${rssMax - rssBefore} bytes while streaming 256 MiB`);
    });

    it('resets the runtime stream at once when a proxied client disconnects mid-response', async () => {
      const res = await new Promise<http.IncomingMessage>((resolve, reject) => {
        http.get(`${scheduler.url}/proxy/rt-s/drip`, { agent: false }, resolve).once('error', reject);
      });
      assert.equal(res.headers['content-type'], 'text/event-stream');
      const [first] = (await once(res, 'data')) as [Buffer];
      assert.equal(first.toString(), 'data: first\n\n', 'the SSE event is flushed through the proxy as written');
      res.destroy();
      const start = performance.now();
      while (closedOnRuntime.length === 0 && performance.now() - start < 2000)
        await new Promise((r) => setTimeout(r, 5));
      assert.deepEqual(closedOnRuntime, [{ path: '/drip', rstCode: http2.constants.NGHTTP2_CANCEL }]);
    });
  });
}

async function floodResponse(res: http2.Http2ServerResponse, state: Flood): Promise<void> {
  res.writeHead(200, { 'content-type': 'application/octet-stream' });
  let closed = false;
  res.once('close', () => (closed = true));
  while (state.offered < FLOOD_BYTES && !closed) {
    state.offered += CHUNK.length;
    if (!res.write(CHUNK)) {
      state.waiting = true;
      await drainOrClose(res);
      state.waiting = false;
    }
  }
  res.end();
  state.done = true;
}

function drainOrClose(res: http2.Http2ServerResponse): Promise<void> {
  return new Promise((resolve) => {
    const done = (): void => {
      res.off('drain', done);
      res.off('close', done);
      resolve();
    };
    res.once('drain', done);
    res.once('close', done);
  });
}

describe('a runtime writing garbage', () => {
  let scheduler: Scheduler;
  const dialers: TunnelDialer[] = [];
  const healthy: Tunnel[] = [];
  before(async () => {
    scheduler = await startScheduler();
    for (const id of ['ok-1', 'ok-2']) {
      const r = await startRuntime(scheduler, id, (_req, res) => res.end(id));
      dialers.push(r.dialer);
      healthy.push(r.tunnel);
    }
  });
  afterEach(async () => {
    for (const t of healthy) assert.equal((await readStream(t.request({ ':path': '/' }))).body, t.runtimeId);
  });
  after(async () => {
    for (const d of dialers) void d.close();
    await scheduler.close();
  });

  const headers = { authorization: `Bearer ${TOKEN}`, 'x-runtime-info': encodeInfo(runtimeInfo('bad')) };
  const cases: { name: string; send: (accepted: Promise<Tunnel>) => Promise<() => void> }[] = [
    {
      name: 'garbage inside WebSocket frames loses only its own tunnel',
      send: async (accepted) => {
        const ws = new WebSocket(`${scheduler.url.replace('http', 'ws')}/api/runtime/connect`, {
          headers,
          perMessageDeflate: false,
        });
        ws.on('error', () => {});
        await Promise.all([accepted, once(ws, 'open')]);
        ws.send(randomBytes(4096));
        return () => ws.terminate();
      },
    },
    {
      name: 'garbage bytes below the WebSocket framing lose only their own tunnel',
      send: (accepted) =>
        garbageAfterUpgrade(accepted, {
          upgrade: 'websocket',
          'sec-websocket-version': '13',
          'sec-websocket-key': 'dGhlIHNhbXBsZSBub25jZQ==',
        }),
    },
    {
      name: 'garbage bytes on the http2 transport lose only their own tunnel',
      send: (accepted) => garbageAfterUpgrade(accepted, { upgrade: TUNNEL_UPGRADE }),
    },
  ];
  /** Completes the connect upgrade by hand, then writes random bytes where the tunnel's protocol should be. */
  async function garbageAfterUpgrade(
    accepted: Promise<Tunnel>,
    upgradeHeaders: http.OutgoingHttpHeaders,
  ): Promise<() => void> {
    const req = http.request(`${scheduler.url}/api/runtime/connect`, {
      agent: false,
      headers: { ...headers, connection: 'Upgrade', ...upgradeHeaders },
    });
    req.end();
    const [, socket] = (await once(req, 'upgrade')) as [http.IncomingMessage, Socket];
    socket.on('error', () => {});
    await accepted;
    socket.write(randomBytes(4096));
    return () => socket.destroy();
  }
  for (const c of cases) {
    it(c.name, async () => {
      const accepted = scheduler.nextTunnel('bad');
      const cleanup = await c.send(accepted);
      try {
        const reason = await (await accepted).whenClosed;
        assert.match(reason, /error|closed/);
        assert.equal(scheduler.endpoint.get('bad'), undefined);
        assert.deepEqual(
          scheduler.endpoint
            .list()
            .map((t) => t.runtimeId)
            .sort(),
          ['ok-1', 'ok-2'],
        );
      } finally {
        cleanup();
      }
    });
  }
});
