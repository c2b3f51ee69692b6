// A runtime that fails a request after receiving it: the gateway answers 502
// (the connection closed before a response head, or the stream was reset
// behind a scheduler proxy) or 504 (no head in time), never a 500, and sends
// the request once (it may have been acted on).
import { createServer } from 'node:http';
import http2 from 'node:http2';
import https from 'node:https';
import type { Server } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { ManualClock } from '@switchyard/clock/testing';
import { certificateFor127 } from '@switchyard/service/testing';
import { startSchedulerDouble } from './fixtures/scheduler-double.ts';
import type { SchedulerDouble } from './fixtures/scheduler-double.ts';
import { INITIALIZE, listen, post, startHarness, stopServer } from './harness.ts';
import { Registry } from 'prom-client';
import { createGateway } from '@switchyard/gateway';
import type { Gateway, GatewayOptions } from '@switchyard/gateway';

const STATELESS = { 'mcp-protocol-version': '2026-07-28', 'x-switchyard-process': 'p1' };
const STATELESS_UNNAMED = { 'mcp-protocol-version': '2026-07-28' };
const call = (tool: string) => ({ jsonrpc: '2.0', id: 9, method: 'tools/call', params: { name: tool, arguments: {} } });

/**
 * A direct-mode gateway (unless `options` say otherwise) whose scheduler
 * places everything on `runtime` (started here), offered under each of
 * `ids`; close() stops all three.
 */
async function gatewayInFrontOf(
  runtime: Server,
  options: Partial<GatewayOptions> = {},
  ids = ['rt-under-test'],
): Promise<{ gateway: Gateway; url: string; scheduler: SchedulerDouble; close(): Promise<void> }> {
  await new Promise<void>((resolve) => runtime.listen(0, '127.0.0.1', resolve));
  const address = `http://127.0.0.1:${(runtime.address() as AddressInfo).port}`;
  const scheduler = await startSchedulerDouble(ids.map((id) => ({ id, address })));
  const gateway = createGateway({ schedulers: [scheduler.url], upstreamMode: 'direct', ...options });
  const { server, url } = await listen(gateway);
  return {
    gateway,
    url,
    scheduler,
    async close() {
      await stopServer(server);
      await gateway.close();
      runtime.closeAllConnections();
      await new Promise((resolve) => runtime.close(resolve));
      await scheduler.close();
    },
  };
}

describe('a runtime that fails after the request reached it', () => {
  const received: string[] = [];
  const runtime = createServer((req, res) => {
    let body = '';
    req.on('data', (chunk: Buffer) => (body += chunk.toString('utf8')));
    req.on('end', () => {
      received.push(body);
      // "stall" never answers; anything else is cut before a response head.
      if (!body.includes('stall')) res.socket?.destroy();
    });
  });
  let front: Awaited<ReturnType<typeof gatewayInFrontOf>>;
  before(async () => (front = await gatewayInFrontOf(runtime, { idleTimeoutMs: 500 })));
  after(() => front.close());

  const cases = [
    {
      name: 'a stateless tools/call cut by the runtime is a 502, sent once',
      body: call('reset'),
      headers: STATELESS,
      status: 502,
    },
    { name: 'an initialize cut by the runtime is a 502, sent once', body: INITIALIZE, headers: {}, status: 502 },
    {
      name: 'a tools/call the runtime never answers is a 504 after the idle timeout, sent once',
      body: call('stall'),
      headers: STATELESS,
      status: 504,
    },
  ];
  for (const c of cases) {
    it(c.name, async () => {
      received.length = 0;
      const errorsBefore = front.gateway.stats().upstreamErrors;
      const res = await post(front.url, c.body, c.headers);
      assert.equal(res.status, c.status, JSON.stringify(res.json));
      const error = (res.json as { error: { code: number; data: { reason: string } } }).error;
      assert.equal(error.code, -32000);
      assert.equal(error.data.reason, c.status === 502 ? 'upstream_unavailable' : 'upstream_timeout');
      assert.equal(received.length, 1, 'the request reached the runtime exactly once');
      assert.equal(front.gateway.stats().upstreamErrors, errorsBefore + 1);
    });
  }
});

// Through a scheduler proxy, whose 502 body says what became of the request
// (the contract of libs/tunnel's proxy, which its own tests hold it to): the
// runtime reset the stream → 502 to the client, the session kept, nothing
// resent; the runtime is not connected → the session is lost (404), an
// initialize is placed elsewhere. The proxy is of a release without relay
// connections: it refuses them as such a scheduler does (404), so the
// gateway sends every request through /api/proxy.
describe('a runtime that sends the head of a 404 and then nothing', () => {
  let rig: Awaited<ReturnType<typeof gatewayInFrontOf>>;
  let stalled = 0;
  before(async () => {
    const runtime = createServer((req, res) => {
      req.resume();
      stalled++;
      res.writeHead(404, { 'content-type': 'application/json', 'content-length': '100' });
      res.write('{"jsonrpc":"2.0",');
    });
    // No upstream checks: nothing but the gateway's own timeouts ends the wait.
    rig = await gatewayInFrontOf(runtime, { upstreamCheckIntervalMs: 0, idleTimeoutMs: 300 });
  });
  after(() => rig.close());

  it('answers the session 404 once the idle timeout has passed, not never', async () => {
    const started = performance.now();
    const reply = await post(rig.url, call('echo'), { 'mcp-session-id': 'session-stalled' });
    assert.equal(reply.status, 404, JSON.stringify(reply.json));
    assert.equal(stalled, 1);
    assert.ok(performance.now() - started < 5_000, `answered after ${performance.now() - started} ms`);
  });
});

describe('a runtime behind a scheduler proxy that fails a request', () => {
  const received: { runtime: string; method: string }[] = [];
  const relayAsks: string[] = [];
  /** What the proxy answers for each runtime; anything absent answers as a runtime would. */
  const failures = new Map<string, 'runtime stream failed' | 'runtime not connected'>();
  const proxy = createServer((req, res) => {
    const runtime = /^\/api\/proxy\/([^/]+)\/mcp$/.exec(req.url ?? '')?.[1] ?? '';
    let body = '';
    req.on('data', (chunk: Buffer) => (body += chunk.toString('utf8')));
    req.on('end', () => {
      const message = JSON.parse(body) as { id: number; method: string };
      received.push({ runtime, method: message.method });
      const failure = failures.get(runtime);
      if (failure) {
        res.writeHead(502, { 'content-type': 'application/json' });
        return void res.end(JSON.stringify({ error: failure, runtime }));
      }
      const session = req.headers['x-switchyard-session-id'];
      res.writeHead(200, { 'content-type': 'application/json', ...(session ? { 'mcp-session-id': session } : {}) });
      res.end(JSON.stringify({ jsonrpc: '2.0', id: message.id, result: { from: runtime } }));
    });
  });
  proxy.on('upgrade', (req, socket) => {
    relayAsks.push(`${req.url} ${req.headers.upgrade}`);
    socket.end('HTTP/1.1 404 Not Found\r\nConnection: close\r\nContent-Length: 0\r\n\r\n');
  });
  let front: Awaited<ReturnType<typeof gatewayInFrontOf>>;
  before(async () => (front = await gatewayInFrontOf(proxy, { upstreamMode: 'proxy' }, ['rt-a', 'rt-b'])));
  after(() => front.close());
  /** The next request goes to rt-a, which fails it so; rt-b answers. */
  const failFirstPick = (failure: 'runtime stream failed' | 'runtime not connected'): void => {
    failures.clear();
    failures.set('rt-a', failure);
    front.scheduler.preferred = 'rt-a';
    received.length = 0;
  };
  const reasonOf = (json: unknown): string => (json as { error: { data: { reason: string } } }).error.data.reason;

  it('keeps a session whose runtime reset one request, and loses it once the runtime is gone', async () => {
    failures.clear();
    front.scheduler.preferred = 'rt-a';
    const opened = await post(front.url, INITIALIZE);
    assert.equal(opened.status, 200);
    const session = { 'mcp-session-id': opened.headers.get('mcp-session-id')! };
    const scheduled = front.scheduler.calls.length;

    failures.set('rt-a', 'runtime stream failed');
    received.length = 0;
    const reset = await post(front.url, call('echo'), session);
    assert.equal(reset.status, 502, JSON.stringify(reset.json));
    assert.equal(reasonOf(reset.json), 'upstream_unavailable');
    assert.deepEqual(received, [{ runtime: 'rt-a', method: 'tools/call' }], 'sent once');

    failures.clear();
    const next = await post(front.url, call('echo'), session);
    assert.equal(next.status, 200, 'the session still routes to its runtime');
    assert.equal(front.scheduler.calls.length, scheduled, 'from the route cache: the route was kept');

    failures.set('rt-a', 'runtime not connected');
    const gone = await post(front.url, call('echo'), session);
    assert.equal(gone.status, 404);
    assert.equal(reasonOf(gone.json), 'session_not_found');
    assert.deepEqual(relayAsks, ['/api/relay/rt-a switchyard-relay'], 'the relay was asked for once, then not again');
  });

  it('answers 502 to an initialize whose stream the runtime reset, sent once', async () => {
    failFirstPick('runtime stream failed');
    const res = await post(front.url, INITIALIZE);
    assert.equal(res.status, 502, JSON.stringify(res.json));
    assert.deepEqual(received, [{ runtime: 'rt-a', method: 'initialize' }]);
  });

  it('places an initialize elsewhere when its runtime is not connected', async () => {
    failFirstPick('runtime not connected');
    const res = await post(front.url, INITIALIZE);
    assert.equal(res.status, 200, JSON.stringify(res.json));
    assert.deepEqual(
      received.map((r) => r.runtime),
      ['rt-a', 'rt-b'],
    );
  });

  it('answers 502 to a stateless request whose stream the runtime reset, without resending it', async () => {
    failFirstPick('runtime stream failed');
    const res = await post(front.url, { jsonrpc: '2.0', id: 3, method: 'tools/list' }, STATELESS);
    assert.equal(res.status, 502, JSON.stringify(res.json));
    assert.deepEqual(received, [{ runtime: 'rt-a', method: 'tools/list' }]);
  });
});

// A runtime whose tunnel carries as many streams as it takes at once: the
// scheduler refuses the relay, or the /api/proxy request, 503 with its error
// header (the contract of libs/tunnel's proxy, held by its stream-limit
// test). A request bound to that runtime gets a JSON-RPC 503
// capacity_exhausted at once, is not sent elsewhere, and relays are asked
// for again next time; a new session or an unnamed stateless request is
// placed on another runtime. A runtime's own 503, without the header,
// passes through as it is. The gateway's relays to a full runtime close,
// since each holds one of its streams (rt-shed: one relay granted, then full).
describe('a runtime whose tunnel carries as many streams as it takes', () => {
  const FULL = { 'x-switchyard-proxy-error': 'runtime stream limit reached', 'retry-after': '1' };
  const fullBody = (runtime: string): string => JSON.stringify({ error: 'runtime stream limit reached', runtime });
  const proxied: string[] = [];
  const relayAsks: string[] = [];
  // rt-full and rt-freed: their relays are refused as full. The others: relays refused as by an older
  // scheduler (404). /api/proxy answers rt-full and rt-old-full as full (a stream freed since for rt-freed),
  // rt-busy, rt-ok and rt-freed as their runtimes do.
  const proxy = createServer((req, res) => {
    const runtime = /^\/api\/proxy\/([^/]+)\/mcp$/.exec(req.url ?? '')?.[1] ?? '';
    let body = '';
    req.on('data', (chunk: Buffer) => (body += chunk.toString('utf8')));
    req.on('end', () => {
      proxied.push(runtime);
      if (runtime === 'rt-busy') return void res.writeHead(503, { 'content-type': 'text/plain' }).end('sandbox busy');
      if (runtime === 'rt-ok' || runtime === 'rt-freed') {
        const session = req.headers['x-switchyard-session-id'];
        res.writeHead(200, { 'content-type': 'application/json', ...(session ? { 'mcp-session-id': session } : {}) });
        const { id } = JSON.parse(body) as { id: number };
        return void res.end(JSON.stringify({ jsonrpc: '2.0', id, result: { from: runtime } }));
      }
      res.writeHead(503, { ...FULL, 'content-type': 'application/json' }).end(fullBody(runtime));
    });
  });
  /** rt-shed's runtime, behind the one relay it grants: holds each request until the test lets it answer. */
  const held: (() => void)[] = [];
  const shedRuntime = createServer((req, res) => {
    let body = '';
    req.on('data', (chunk: Buffer) => (body += chunk.toString('utf8')));
    req.on('end', () => {
      const { id } = JSON.parse(body) as { id: number };
      held.push(() => {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ jsonrpc: '2.0', id, result: { from: 'rt-shed' } }));
      });
    });
  });
  let shedRelay: Socket | undefined;
  proxy.on('upgrade', (req, socket: Socket) => {
    relayAsks.push(req.url ?? '');
    if (req.url === '/api/relay/rt-shed' && !shedRelay) {
      shedRelay = socket;
      socket.write('HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: switchyard-relay\r\n\r\n');
      return void shedRuntime.emit('connection', socket);
    }
    if (req.url !== '/api/relay/rt-full' && req.url !== '/api/relay/rt-freed' && req.url !== '/api/relay/rt-shed') {
      return void socket.end('HTTP/1.1 404 Not Found\r\nConnection: close\r\nContent-Length: 0\r\n\r\n');
    }
    const body = fullBody(req.url.slice('/api/relay/'.length));
    const head = Object.entries(FULL).map(([name, value]) => `${name}: ${value}\r\n`);
    socket.end(
      `HTTP/1.1 503 Service Unavailable\r\nConnection: close\r\nContent-Type: application/json\r\n${head.join('')}` +
        `Content-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
    );
  });
  let front: Awaited<ReturnType<typeof gatewayInFrontOf>>;
  before(
    async () =>
      (front = await gatewayInFrontOf(proxy, { upstreamMode: 'proxy' }, [
        'rt-full',
        'rt-freed',
        'rt-old-full',
        'rt-busy',
        'rt-shed',
      ])),
  );
  after(() => front.close());
  /** Runs `body` with the scheduler offering only `ids` (same address). */
  const offering = async (ids: string[], body: () => Promise<void>): Promise<void> => {
    const all = front.scheduler.runtimes;
    front.scheduler.runtimes = ids.map((id) => ({ ...all[0]!, id }));
    try {
      await body();
    } finally {
      front.scheduler.runtimes = all;
    }
  };
  /** Places the next process on `runtime`; resolves with the headers of its stateless requests. */
  const on = (runtime: string): Record<string, string> => {
    front.scheduler.preferred = runtime;
    proxied.length = 0;
    relayAsks.length = 0;
    return { ...STATELESS, 'x-switchyard-process': `p-${runtime}` };
  };
  const errorOf = (json: unknown) =>
    (json as { id: number; error: { message: string; data: { reason: string } } }).error;

  it('answers a JSON-RPC 503, and sends through /api/proxy for a second before asking for relays again', async () => {
    const headers = on('rt-full');
    const errorsBefore = front.gateway.stats().upstreamErrors;
    const refused = async (attempt: number): Promise<void> => {
      const res = await post(front.url, call('echo'), headers);
      assert.equal(res.status, 503, `attempt ${attempt}: ${JSON.stringify(res.json)}`);
      assert.equal((res.json as { id: number }).id, 9);
      assert.equal(errorOf(res.json).data.reason, 'capacity_exhausted');
      assert.match(errorOf(res.json).message, /the runtime carries as many requests and streams as it takes at once/);
    };
    await refused(1);
    await refused(2);
    assert.deepEqual(relayAsks, ['/api/relay/rt-full'], 'the second request dialled no relay');
    assert.deepEqual(proxied, ['rt-full', 'rt-full'], 'each was tried on /api/proxy, whose streams end with it');
    await new Promise((resolve) => setTimeout(resolve, 1100));
    await refused(3);
    assert.deepEqual(relayAsks, ['/api/relay/rt-full', '/api/relay/rt-full'], 'relays asked for again after 1 s');
    assert.equal(front.gateway.stats().upstreamErrors, errorsBefore + 3);
  });

  it("closes this gateway's relays to a full runtime, the busy ones once they have answered", async () => {
    const headers = on('rt-shed');
    // The runtime's one free stream carries the first call, held; the second finds the tunnel full.
    const first = post(front.url, call('sleep'), headers);
    for (let i = 0; i < 500 && held.length === 0; i++) await new Promise((r) => setTimeout(r, 5));
    assert.equal(held.length, 1, 'the first call reached the runtime on a relay');
    const second = await post(front.url, call('echo'), headers);
    assert.equal(second.status, 503, JSON.stringify(second.json));
    assert.equal(errorOf(second.json).data.reason, 'capacity_exhausted');
    assert.equal(shedRelay!.destroyed, false, 'the relay stays while its call is in flight');
    held.shift()!();
    const answered = await first;
    assert.equal(answered.status, 200, JSON.stringify(answered.json));
    assert.deepEqual((answered.json as { result: unknown }).result, { from: 'rt-shed' });
    // Within 1.5 s: the stand-in's keep-alive (5 s) would have undici close it after 3 s anyway.
    const deadline = performance.now() + 1500;
    while (!shedRelay!.destroyed && performance.now() < deadline) await new Promise((r) => setTimeout(r, 5));
    assert.equal(shedRelay!.destroyed, true, 'the gateway closed the relay, whose stream the full runtime needs');
  });

  it('answers from /api/proxy when the tunnel has a stream for it there', async () => {
    const headers = on('rt-freed');
    const res = await post(front.url, call('echo'), headers);
    assert.equal(res.status, 200, JSON.stringify(res.json));
    assert.deepEqual((res.json as { result: unknown }).result, { from: 'rt-freed' });
    assert.deepEqual(relayAsks, ['/api/relay/rt-freed']);
    assert.deepEqual(proxied, ['rt-freed']);
  });

  it('answers a JSON-RPC 503 for the same refusal through /api/proxy', async () => {
    const headers = on('rt-old-full');
    const res = await post(front.url, { jsonrpc: '2.0', id: 4, method: 'tools/list' }, headers);
    assert.deepEqual(relayAsks, ['/api/relay/rt-old-full']);
    assert.deepEqual(proxied, ['rt-old-full']);
    assert.equal(res.status, 503, JSON.stringify(res.json));
    assert.equal((res.json as { id: number }).id, 4);
    assert.equal(errorOf(res.json).data.reason, 'capacity_exhausted');
  });

  it('places a new session and an unnamed stateless request on another runtime', async () => {
    // On a relay, or through /api/proxy while a relay refusal is remembered.
    const triedFull = (): boolean => relayAsks.includes('/api/relay/rt-full') || proxied.includes('rt-full');
    await offering(['rt-full', 'rt-ok'], async () => {
      on('rt-full');
      const opened = await post(front.url, INITIALIZE);
      assert.equal(opened.status, 200, JSON.stringify(opened.json));
      assert.deepEqual((opened.json as { result: unknown }).result, { from: 'rt-ok' });
      assert.ok(opened.headers.get('mcp-session-id'), 'the session is opened on rt-ok');
      assert.ok(triedFull(), 'rt-full was tried first');

      on('rt-full');
      const unnamed = await post(front.url, { jsonrpc: '2.0', id: 5, method: 'tools/list' }, STATELESS_UNNAMED);
      assert.equal(unnamed.status, 200, JSON.stringify(unnamed.json));
      assert.deepEqual((unnamed.json as { result: unknown }).result, { from: 'rt-ok' });
      assert.ok(triedFull(), 'rt-full was tried first');
    });
  });

  it('answers 503 capacity_exhausted, not unschedulable, when every runtime is full', async () => {
    await offering(['rt-full'], async () => {
      on('rt-full');
      const res = await post(front.url, INITIALIZE);
      assert.equal(res.status, 503, JSON.stringify(res.json));
      assert.equal(errorOf(res.json).data.reason, 'capacity_exhausted');
      assert.equal(res.headers.get('retry-after'), '1');
    });
  });

  it("passes a runtime's own 503 through unchanged", async () => {
    const headers = on('rt-busy');
    const res = await fetch(front.url, {
      method: 'POST',
      headers: { ...headers, 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
      body: JSON.stringify(call('echo')),
    });
    assert.equal(res.status, 503);
    assert.equal(await res.text(), 'sandbox busy');
    assert.deepEqual(proxied, ['rt-busy']);
  });
});

// An idle connection to an upstream is closed by the gateway, well before
// the upstream would close it: sending a request on a connection the server
// is closing gets it reset, and the gateway cannot tell whether it was read.
// An upstream that announces no timeout may be any server (Node's closes at
// 5 s); schedulers and runtimes announce 65 s, which the gateway does not
// wait out either, so a stalled event loop is no risk.
for (const upstream of [
  { name: 'that announces no keep-alive timeout', announces: false },
  { name: 'that announces a long keep-alive timeout (65 s, as schedulers and runtimes do)', announces: true },
]) {
  describe(`an idle connection to an upstream ${upstream.name}`, () => {
    let closedAfterMs: number | undefined;
    let answeredAt = 0;
    const runtime = createServer((req, res) => {
      req.resume();
      // The gateway's liveness checks come on connections of their own, closed at once.
      if (req.url === '/healthz') return void res.end('{"status":"ok"}');
      req.on('end', () => {
        const body = JSON.stringify({ jsonrpc: '2.0', id: 9, result: { content: [] } });
        // Set by the app, this header keeps Node from announcing its timeout.
        const headers = upstream.announces ? {} : { connection: 'keep-alive' };
        res.writeHead(200, { 'content-type': 'application/json', ...headers });
        res.end(body, () => (answeredAt = performance.now()));
        req.socket.once('close', () => (closedAfterMs = performance.now() - answeredAt));
      });
    });
    runtime.keepAliveTimeout = 65_000;
    let front: Awaited<ReturnType<typeof gatewayInFrontOf>>;
    before(async () => (front = await gatewayInFrontOf(runtime)));
    after(() => front.close());

    it('is closed by the gateway within 5 s', async () => {
      const res = await post(front.url, call('echo'), STATELESS);
      assert.equal(res.status, 200);
      const deadline = performance.now() + 6_000;
      while (closedAfterMs === undefined && performance.now() < deadline) await new Promise((r) => setTimeout(r, 50));
      assert.ok(closedAfterMs !== undefined && closedAfterMs < 5_000, `closed after ${closedAfterMs} ms`);
    });
  });
}

// A scheduler replica behind TLS whose certificate the gateway does not
// trust: the handshake fails before any request byte leaves, on relay
// connections, through /api/proxy and on event streams (HTTP/2) alike. The client gets a 502 that says
// TLS, the operator an error line that says what to check, and no retry or
// rescheduling hides it (only configuration mends it). Each gateway runs on a
// clock that stands still: on a loaded machine a schedule ask unanswered for
// 250 ms is asked again (a hedge), which the count of asks below would take
// for a rescheduling.
describe('a scheduler replica whose certificate the gateway does not trust', () => {
  const certificate = certificateFor127();
  const missing = 'missing' in certificate ? certificate.missing : false;
  let reached = 0;
  const replica = https.createServer('missing' in certificate ? {} : certificate, (_req, res) => {
    reached++;
    res.end();
  });
  let address = '';
  before(async () => {
    if (missing) return;
    await new Promise<void>((resolve) => replica.listen(0, '127.0.0.1', resolve));
    address = `https://127.0.0.1:${(replica.address() as AddressInfo).port}`;
  });
  after(() => replica.close());

  /** What the client, the log and the metrics show of a failed handshake: no retry, nothing got through. */
  const assertTlsFailure = (
    status: number,
    json: unknown,
    errors: string[],
    scheduler: SchedulerDouble,
    gateway: Gateway,
  ): void => {
    assert.equal(status, 502, JSON.stringify(json));
    assert.match((json as { error: { message: string } }).error.message, /TLS to the upstream failed/);
    assert.deepEqual(errors, ['TLS to the upstream failed: check its certificate and the trusted CAs']);
    assert.equal(scheduler.calls.length, 1, 'not rescheduled');
    assert.equal(reached, 0, 'no request got through');
    assert.equal(gateway.stats().upstreamErrors, 1);
  };

  for (const relayConnections of [true, false]) {
    it(
      `answers 502 "TLS … failed" and logs why (relay connections ${relayConnections ? 'on' : 'off'})`,
      { skip: missing },
      async () => {
        const errors: string[] = [];
        const log = (): void => {};
        const logger = { info: log, warn: log, debug: log, error: (_o: object, msg: string) => void errors.push(msg) };
        const scheduler = await startSchedulerDouble([{ id: 'rt-tls', address }]);
        const gateway = createGateway({
          schedulers: [scheduler.url],
          upstreamMode: 'proxy',
          relayConnections,
          logger,
          clock: new ManualClock(),
        });
        const { server, url } = await listen(gateway);
        try {
          const res = await post(url, INITIALIZE);
          assertTlsFailure(res.status, res.json, errors, scheduler, gateway);
        } finally {
          await stopServer(server);
          await gateway.close();
          await scheduler.close();
        }
      },
    );
  }

  it('answers an event stream (GET over HTTP/2) 502 "TLS … failed" too', { skip: missing }, async () => {
    // A front offering h2 and HTTP/1.1, as a proxy with HTTP/2 on would.
    const h2Replica = http2.createSecureServer({ ...(certificate as object), allowHTTP1: true }, (_req, res) => {
      reached++;
      res.end();
    });
    await new Promise<void>((resolve) => h2Replica.listen(0, '127.0.0.1', resolve));
    const h2Address = `https://127.0.0.1:${(h2Replica.address() as AddressInfo).port}`;
    const errors: string[] = [];
    const log = (): void => {};
    const logger = { info: log, warn: log, debug: log, error: (_o: object, msg: string) => void errors.push(msg) };
    const scheduler = await startSchedulerDouble([{ id: 'rt-tls', address: h2Address }]);
    const gateway = createGateway({
      schedulers: [scheduler.url],
      upstreamMode: 'proxy',
      logger,
      clock: new ManualClock(),
    });
    const { server, url } = await listen(gateway);
    try {
      const res = await fetch(url, {
        headers: { accept: 'text/event-stream', 'mcp-session-id': 'a-session', 'mcp-protocol-version': '2025-06-18' },
      });
      assertTlsFailure(res.status, await res.json(), errors, scheduler, gateway);
    } finally {
      await stopServer(server);
      await gateway.close();
      await scheduler.close();
      h2Replica.close();
    }
  });
});

/** A gateway logger keeping the messages of its warnings. */
function warningLog() {
  const warnings: string[] = [];
  const quiet = (): void => {};
  const logger = {
    info: quiet,
    debug: quiet,
    error: quiet,
    warn: (_o: object, msg?: string) => void warnings.push(msg ?? ''),
  };
  return { logger, warnings };
}

describe('a scheduler replica that cannot be dialled', () => {
  it('is asked around and logged once, not once per request', async () => {
    const h = await startHarness(1);
    const { logger, warnings } = warningLog();
    // Nothing listens on port 1: every ask of that replica is refused.
    const gateway = createGateway({
      schedulers: ['http://127.0.0.1:1', h.scheduler.url],
      upstreamMode: 'direct',
      logger,
    });
    const { server, url } = await listen(gateway);
    try {
      for (let i = 0; i < 10; i++) assert.equal((await post(url, INITIALIZE)).status, 200);
      // The first ask met the refusing replica, which is asked last after that and now and then again:
      // one line for all of it.
      assert.deepEqual(warnings, ['scheduler unreachable']);
    } finally {
      await stopServer(server);
      await gateway.close();
      await h.close();
    }
  });
});

describe('a scheduler replica that takes connections but never answers', () => {
  // A frozen replica (SIGSTOP, a stuck event loop) or one behind a partition
  // looks like this: the kernel completes the handshake, nothing answers.
  it('is asked around after the hedge delay, then asked last', async () => {
    const h = await startHarness(1);
    const asked: string[] = [];
    const frozen = createServer((req) => void asked.push(req.url ?? ''));
    await new Promise<void>((resolve) => frozen.listen(0, '127.0.0.1', resolve));
    const registry = new Registry();
    const { logger, warnings } = warningLog();
    const gateway = createGateway({
      schedulers: [`http://127.0.0.1:${(frozen.address() as AddressInfo).port}`, h.scheduler.url],
      upstreamMode: 'direct',
      metrics: { registry, prefix: 'switchyard_gateway_' },
      logger,
    });
    const { server, url } = await listen(gateway);
    try {
      const waits: number[] = [];
      for (let i = 0; i < 6; i++) {
        const started = performance.now();
        assert.equal((await post(url, INITIALIZE)).status, 200);
        waits.push(performance.now() - started);
      }
      // The first session met the frozen replica first and waited for the hedge (250 ms), not for a timeout (5 s).
      assert.ok(waits[0]! >= 200 && waits[0]! < 1500, `first session waited ${waits[0]!.toFixed(0)} ms`);
      // After that the frozen replica is asked last, so no later session waits for it.
      for (const wait of waits.slice(1)) assert.ok(wait < 200, `a later session waited ${wait.toFixed(0)} ms`);
      assert.deepEqual(asked, ['/api/schedule']);
      assert.match(await registry.metrics(), /switchyard_gateway_schedule_hedges_total 1\n/);
      assert.deepEqual(warnings, ['scheduler slow to answer; asking another replica too']);
    } finally {
      await stopServer(server);
      await gateway.close();
      frozen.closeAllConnections();
      await new Promise((resolve) => frozen.close(resolve));
      await h.close();
    }
  });

  it('behind one URL (a Service), is asked around on another connection', async () => {
    const h = await startHarness(1);
    // Stands for a Service: the first connection lands on a frozen replica, later ones on a live one.
    let connections = 0;
    const service = createServer((req, res) => {
      if ((req.socket as { frozen?: boolean }).frozen) return;
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        fetch(`${h.scheduler.url}${req.url}`, { method: 'POST', body: Buffer.concat(chunks) }).then(
          async (answer) =>
            res.writeHead(answer.status, { 'content-type': 'application/json' }).end(await answer.text()),
          () => res.writeHead(502).end(),
        );
      });
    });
    service.on('connection', (socket) => Object.assign(socket, { frozen: connections++ === 0 }));
    await new Promise<void>((resolve) => service.listen(0, '127.0.0.1', resolve));
    const gateway = createGateway({
      schedulers: [`http://127.0.0.1:${(service.address() as AddressInfo).port}`],
      upstreamMode: 'direct',
    });
    const { server, url } = await listen(gateway);
    try {
      const started = performance.now();
      assert.equal((await post(url, INITIALIZE)).status, 200);
      const waited = performance.now() - started;
      assert.ok(waited >= 200 && waited < 1500, `the session waited ${waited.toFixed(0)} ms`);
      assert.equal(connections, 2);
    } finally {
      await stopServer(server);
      await gateway.close();
      service.closeAllConnections();
      await new Promise((resolve) => service.close(resolve));
      await h.close();
    }
  });
});
