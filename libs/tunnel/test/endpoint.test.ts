import { after, afterEach, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { once } from 'node:events';
import http from 'node:http';
import type http2 from 'node:http2';
import type { Duplex } from 'node:stream';
import { EventSource } from 'eventsource';
import { SwitchyardError } from '@switchyard/protocol';
import { ManualClock } from '@switchyard/clock/testing';
import { TUNNEL_UPGRADE } from '../src/index.ts';
import { REFUSAL_LOG_INTERVAL_MS } from '../src/refusal-log.ts';
import type { CarrierTransport, TunnelDialer } from '../src/index.ts';
import {
  TOKEN,
  encodeInfo,
  httpRequest,
  rawConnect,
  readStream,
  runtimeInfo,
  startRuntime,
  startScheduler,
  until,
} from './helpers.ts';
import type { LogLine, Scheduler } from './helpers.ts';

const hello = (req: http2.Http2ServerRequest, res: http2.Http2ServerResponse): void => {
  res.setHeader('content-type', 'text/plain');
  res.end(`hello ${req.method} ${req.url}`);
};

describe('tunnel endpoint admission', () => {
  let scheduler: Scheduler;
  const dialers: TunnelDialer[] = [];
  before(async () => {
    scheduler = await startScheduler({ maxRuntimes: 2, headerBytesMax: 4096 });
  });
  afterEach(() => {
    for (const d of dialers.splice(0)) void d.close();
  });
  after(() => scheduler.close());

  const transports: CarrierTransport[] = ['http2', 'websocket'];
  for (const transport of transports) {
    it(`accepts a runtime dialing for ${transport} and carries requests through its tunnel`, async () => {
      const id = `rt-a-${transport}`;
      const { dialer, tunnel } = await startRuntime(scheduler, id, hello, { transport });
      dialers.push(dialer);
      assert.equal(scheduler.endpoint.get(id), tunnel);
      assert.equal(tunnel.transport, transport);
      assert.deepEqual(tunnel.info.classes, ['demo']);
      assert.ok(tunnel.generation > Date.now() * 999, 'generation starts from the wall clock');
      const reply = await readStream(tunnel.request({ ':method': 'GET', ':path': '/x?y=1' }));
      assert.deepEqual(reply, { status: 200, body: 'hello GET /x?y=1' });
      const viaProxy = await httpRequest(`${scheduler.url}/proxy/${id}/p`, { method: 'POST', body: 'abc' });
      assert.equal(viaProxy.body, 'hello POST /p');
    });
  }

  it('drops at once a runtime that hangs up after the upgrade, before speaking HTTP/2', async () => {
    // The default ping interval is 5 s: a close reason within a second comes from the hang-up itself.
    const accepted = scheduler.nextTunnel('rt-gone');
    const req = http.request(`${scheduler.url}/api/runtime/connect`, {
      agent: false,
      headers: {
        authorization: `Bearer ${TOKEN}`,
        'x-runtime-info': encodeInfo(runtimeInfo('rt-gone')),
        connection: 'Upgrade',
        upgrade: TUNNEL_UPGRADE,
      },
    });
    req.end();
    const [, socket] = (await once(req, 'upgrade')) as [http.IncomingMessage, Duplex];
    const tunnel = await accepted;
    const start = performance.now();
    socket.end();
    const reason = await tunnel.whenClosed;
    assert.ok(performance.now() - start < 1000, `dropped after ${(performance.now() - start).toFixed(0)} ms`);
    assert.equal(reason, 'connection closed by the peer');
    assert.equal(scheduler.endpoint.get('rt-gone'), undefined);
  });

  it('takes the http2 transport when a runtime leaves the choice to it', async () => {
    const { dialer, tunnel } = await startRuntime(scheduler, 'rt-auto', hello);
    dialers.push(dialer);
    assert.equal(tunnel.transport, 'http2');
  });

  it('serves fetch with streaming bodies in both directions', async () => {
    const { dialer, tunnel } = await startRuntime(scheduler, 'rt-f', (req, res) => {
      res.setHeader('x-len', req.headers['content-length'] ?? 'chunked');
      req.pipe(res);
    });
    dialers.push(dialer);
    const upload = new ReadableStream<Uint8Array>({
      start(c) {
        c.enqueue(new TextEncoder().encode('part1-'));
        c.enqueue(new TextEncoder().encode('part2'));
        c.close();
      },
    });
    const res = await tunnel.fetch('http://runtime/echo', {
      method: 'POST',
      body: upload,
      duplex: 'half',
    } as RequestInit);
    assert.equal(res.status, 200);
    assert.equal(await res.text(), 'part1-part2');
    const aborted = new AbortController();
    aborted.abort();
    await assert.rejects(tunnel.fetch('http://runtime/', { signal: aborted.signal }), { name: 'AbortError' });
  });

  it('lets the eventsource package read an SSE stream through fetch', async () => {
    const { dialer, tunnel } = await startRuntime(scheduler, 'rt-sse', (_req, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write('id: 1\nevent: snapshot\ndata: {"n":1}\n\n');
      res.write('id: 2\nevent: delta\ndata: {"n":2}\n\n');
    });
    dialers.push(dialer);
    const source = new EventSource('http://runtime/watch', { fetch: tunnel.fetch });
    try {
      const seen: string[] = [];
      await new Promise<void>((resolve, reject) => {
        source.addEventListener('snapshot', (e) => seen.push(`snapshot:${e.data}:${e.lastEventId}`));
        source.addEventListener('delta', (e) => {
          seen.push(`delta:${e.data}:${e.lastEventId}`);
          resolve();
        });
        source.onerror = (e) => reject(new Error(`eventsource error ${e.message}`));
      });
      assert.deepEqual(seen, ['snapshot:{"n":1}:1', 'delta:{"n":2}:2']);
    } finally {
      source.close();
    }
  });

  const refusals: { name: string; headers: http.OutgoingHttpHeaders; status: number; mention: RegExp }[] = [
    {
      name: 'a wrong token is refused with 401',
      headers: { authorization: 'Bearer not-the-token-secret-xyz', 'x-runtime-info': encodeInfo(runtimeInfo('r1')) },
      status: 401,
      mention: /join token/,
    },
    {
      name: 'a missing token is refused with 401',
      headers: { 'x-runtime-info': encodeInfo(runtimeInfo('r1')) },
      status: 401,
      mention: /join token/,
    },
    {
      name: 'info that is not base64url JSON is refused with 400 naming the header',
      headers: { authorization: `Bearer ${TOKEN}`, 'x-runtime-info': '!!!not-json' },
      status: 400,
      mention: /X-Runtime-Info/,
    },
    {
      name: 'info with a bad id is refused with 400 naming the id field',
      headers: {
        authorization: `Bearer ${TOKEN}`,
        'x-runtime-info': encodeInfo({ ...runtimeInfo('r1'), id: 'bad id!' }),
      },
      status: 400,
      mention: /X-Runtime-Info\.id/,
    },
    {
      name: 'info without classes is refused with 400 naming the classes field',
      headers: { authorization: `Bearer ${TOKEN}`, 'x-runtime-info': encodeInfo({ id: 'r1' }) },
      status: 400,
      mention: /X-Runtime-Info\.classes/,
    },
    {
      // latest_version rules would skip it without a word.
      name: 'info with a version no latest_version rule ranks is refused with 400 naming the version field',
      headers: {
        authorization: `Bearer ${TOKEN}`,
        'x-runtime-info': encodeInfo({ ...runtimeInfo('r1'), version: 'banana' }),
      },
      status: 400,
      mention: /X-Runtime-Info\.version.*must be a semantic version/,
    },
    {
      name: 'missing info is refused with 400',
      headers: { authorization: `Bearer ${TOKEN}` },
      status: 400,
      mention: /X-Runtime-Info/,
    },
    {
      name: 'oversized headers are refused with 431',
      headers: {
        authorization: `Bearer ${TOKEN}`,
        'x-runtime-info': encodeInfo({ ...runtimeInfo('r1'), metadata: { big: 'x'.repeat(250) } }),
        'x-padding': 'p'.repeat(5000),
      },
      status: 431,
      mention: /too large/,
    },
  ];
  for (const upgrade of ['websocket', TUNNEL_UPGRADE]) {
    for (const c of refusals) {
      it(`${c.name} (Upgrade: ${upgrade})`, async () => {
        const reply = await rawConnect(scheduler, { ...c.headers, upgrade });
        assert.equal(reply.status, c.status);
        assert.match(reply.body, c.mention);
        assert.equal(scheduler.endpoint.get('r1'), undefined);
      });
    }
  }

  it('refuses an Upgrade other than the two transports with 400 naming both', async () => {
    const reply = await rawConnect(scheduler, {
      authorization: `Bearer ${TOKEN}`,
      'x-runtime-info': encodeInfo(runtimeInfo('r1')),
      upgrade: 'h2c',
    });
    assert.equal(reply.status, 400);
    assert.deepEqual(JSON.parse(reply.body), {
      error: 'unsupported Upgrade',
      field: 'Upgrade',
      detail: `expected ${TUNNEL_UPGRADE} or websocket`,
    });
    assert.equal(scheduler.endpoint.get('r1'), undefined);
  });

  it('never writes a presented token into the logs', async () => {
    // Its own scheduler: the shared one has logged a 401 within the interval already.
    const own = await startScheduler();
    try {
      await rawConnect(own, { authorization: 'Bearer not-the-token-secret-xyz' });
      const text = JSON.stringify(own.logs);
      assert.ok(
        own.logs.some((l) => l.msg.includes('refused')),
        'refusals are logged',
      );
      assert.doesNotMatch(text, /not-the-token-secret-xyz/);
      assert.doesNotMatch(text, new RegExp(TOKEN));
    } finally {
      await own.close();
    }
  });

  it('logs refused connects once per reason and interval, with the count held back, however many arrive', async () => {
    const clock = new ManualClock();
    const own = await startScheduler({ clock });
    try {
      const refusedLines = (): LogLine[] => own.logs.filter((l) => l.msg.startsWith('runtime connect refused'));
      for (let i = 0; i < 20; i++) {
        assert.equal((await rawConnect(own, { authorization: `Bearer wrong-${i}` })).status, 401);
        assert.equal((await rawConnect(own, { authorization: `Bearer ${TOKEN}` })).status, 400);
      }
      assert.deepEqual(
        refusedLines().map((l) => [l.level, (l.obj as { status: number }).status]),
        [
          ['warn', 401],
          ['warn', 400],
        ],
        'the first of each reason at once, then nothing within the interval',
      );
      await clock.advance(REFUSAL_LOG_INTERVAL_MS);
      assert.equal((await rawConnect(own, { authorization: 'Bearer wrong' })).status, 401);
      assert.equal(refusedLines().length, 3);
      assert.deepEqual(refusedLines()[2]!.obj, {
        remote: '127.0.0.1',
        status: 401,
        error: 'invalid or missing join token',
        field: undefined,
        unlogged: 19,
      });
    } finally {
      await own.close();
    }
  });

  it('answers 503 past maxRuntimes but lets a connected runtime reconnect', async () => {
    for (const id of ['cap-1', 'cap-2']) dialers.push((await startRuntime(scheduler, id, hello)).dialer);
    const full = await rawConnect(scheduler, {
      authorization: `Bearer ${TOKEN}`,
      'x-runtime-info': encodeInfo(runtimeInfo('cap-3')),
    });
    assert.equal(full.status, 503);
    assert.match(full.body, /capacity/);
    const again = await rawConnect(scheduler, {
      authorization: `Bearer ${TOKEN}`,
      'x-runtime-info': encodeInfo(runtimeInfo('cap-1')),
    });
    assert.equal(again.status, 101);
  });

  it('replaces the first tunnel when the same runtime connects again', async () => {
    // One runtime process: both dials name its instance.
    const instance = 'rt-dup-instance-0123';
    const first = await startRuntime(scheduler, 'rt-dup', hello, { instance });
    dialers.push(first.dialer);
    const closed = new Promise<string>((resolve) =>
      scheduler.events.on('closed', (t, reason: string) => t === first.tunnel && resolve(reason)),
    );
    const second = await startRuntime(scheduler, 'rt-dup', hello, { instance });
    dialers.push(second.dialer);
    assert.match(await closed, /replaced/);
    assert.equal(first.tunnel.closed, true);
    assert.ok(second.tunnel.generation > first.tunnel.generation);
    assert.equal(scheduler.endpoint.get('rt-dup'), second.tunnel);
    assert.throws(
      () => first.tunnel.request({ ':path': '/' }),
      (e: unknown) => {
        return e instanceof SwitchyardError && e.code === 'upstream_unavailable';
      },
    );
    assert.equal((await readStream(second.tunnel.request({ ':path': '/' }))).status, 200);
  });

  it('tells a replaced runtime so; the reference dialer then stays off the id for minutes instead of taking it back', async () => {
    const shared = 'rt-shared';
    const said: { level: string; msg: string }[] = [];
    const logger = {
      info: () => {},
      warn: (_o: object, msg: string) => said.push({ level: 'warn', msg }),
      error: (_o: object, msg: string) => said.push({ level: 'error', msg }),
    };
    // Each would redial 20 ms after losing its tunnel. The newer names no instance, as runtimes of earlier
    // releases, which still take a live runtime's id (a runtime of this release is refused 409 instead).
    const fast = { backoff: { initialMs: 20, maxMs: 20 }, random: () => 0, logger };
    const first = await startRuntime(scheduler, shared, hello, fast);
    dialers.push(first.dialer);
    const second = await startRuntime(scheduler, shared, hello, { ...fast, instance: null });
    dialers.push(second.dialer);
    assert.match(await first.tunnel.whenClosed, /replaced/);
    await new Promise((r) => setTimeout(r, 300));
    assert.equal(scheduler.endpoint.get(shared), second.tunnel, 'the newer runtime keeps the id');
    assert.equal(second.tunnel.closed, false);
    assert.equal(first.dialer.connected, false);
    assert.equal(first.dialer.replaced, true);
    assert.equal(second.dialer.connected, true);
    assert.equal(second.dialer.replaced, false);
    assert.deepEqual(
      said.filter((l) => l.level === 'error').map((l) => l.msg),
      [
        'another runtime connected with this runtime id and replaced this tunnel: dialling again in 5 min; give each runtime its own id',
      ],
    );
  });

  it('says so, once, when an id is replaced three times within 30 s (runtimes that take it back, like older releases)', async () => {
    const shared = 'rt-taken-back';
    const warning = (l: { msg: string }) => l.msg.startsWith('runtime id used by more than one runtime');
    // Each connect replaces the one before, as two runtimes that redial when replaced would.
    for (let n = 0; n < 4; n++) {
      dialers.push((await startRuntime(scheduler, shared, hello, { instance: null })).dialer);
      if (n < 2) assert.equal(scheduler.logs.filter(warning).length, 0, `not suspect after ${n} replacements`);
    }
    const said = scheduler.logs.filter(warning);
    assert.equal(said.length, 1, 'said once per window, not per replacement');
    assert.equal(said[0]!.level, 'warn');
    assert.deepEqual(said[0]!.obj, { runtime: shared, withinMs: 30_000 });
  });

  it('closes every tunnel with GOAWAY and refuses new runtimes once closed, idempotently', async () => {
    const own = await startScheduler();
    try {
      const { dialer, tunnel } = await startRuntime(own, 'rt-end', hello);
      dialers.push(dialer);
      own.endpoint.close();
      own.endpoint.close();
      assert.equal(await tunnel.whenClosed, 'endpoint closed');
      assert.equal(own.endpoint.list().length, 0);
      const refused = await rawConnect(own, {
        authorization: `Bearer ${TOKEN}`,
        'x-runtime-info': encodeInfo(runtimeInfo('z')),
      });
      assert.equal(refused.status, 503);
    } finally {
      await own.close();
    }
  });

  for (const transport of transports) {
    it(
      `closes a tunnel (${transport}) once its join token is removed; the runtime redials with its new token`,
      { timeout: 10_000 },
      async () => {
        const NEW = 'join-token-rotated-0123456789';
        let accepted: readonly string[] = [TOKEN, NEW];
        const own = await startScheduler({ tokens: () => accepted });
        try {
          let presented = TOKEN;
          const stale = await startRuntime(own, `rt-stale-${transport}`, hello, { transport });
          dialers.push(stale.dialer);
          const moved = await startRuntime(own, `rt-moved-${transport}`, hello, { transport, token: () => presented });
          dialers.push(moved.dialer);
          const fresh = await startRuntime(own, `rt-fresh-${transport}`, hello, { transport, token: NEW });
          dialers.push(fresh.dialer);
          presented = NEW;
          const redialled = own.nextTunnel(`rt-moved-${transport}`);
          accepted = [NEW];
          assert.equal(await stale.tunnel.whenClosed, 'join token removed');
          assert.equal(await moved.tunnel.whenClosed, 'join token removed');
          const again = await redialled;
          assert.equal((await readStream(again.request({ ':path': '/' }))).status, 200, 'back with the new token');
          assert.equal(own.endpoint.get(`rt-fresh-${transport}`), fresh.tunnel, 'a tunnel on the new token stays');
          // Only the stale runtime still presents the removed token: a 401 is its redial, refused.
          await until(() =>
            own.logs.some((l) => l.msg === 'runtime connect refused' && (l.obj as { status?: number }).status === 401),
          );
          assert.equal(own.endpoint.get(`rt-stale-${transport}`), undefined, 'the old token is refused on redial');
          assert.ok(
            own.logs.some((l) => l.msg === 'tunnel closed: its join token was removed'),
            'the scheduler says why',
          );
        } finally {
          await own.close();
        }
      },
    );
  }
});
