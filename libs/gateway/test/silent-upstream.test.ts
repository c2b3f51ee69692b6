// A session whose upstream goes silent (frozen, or cut off by the network):
// it takes requests and answers nothing. HTTP/1.1 has no ping, so without a
// check the request in flight, and every later one on a kept-alive
// connection, would wait the gateway's idle timeout. Through a scheduler
// replica, the runtime redials another replica and its sessions follow it;
// in direct mode, a silent runtime's sessions are lost (404) as a dead
// one's are. Upstreams here are stand-ins: replicas that grant relays and
// serve the requests on them themselves, runtimes that answer directly,
// each saying who answered; "freezing" one makes it hold every request,
// its `/healthz` included, until it thaws.
import http from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { Registry } from 'prom-client';
import { ManualClock } from '@switchyard/clock/testing';
import { createGateway } from '@switchyard/gateway';
import type { Gateway } from '@switchyard/gateway';
import { startSchedulerDouble } from './fixtures/scheduler-double.ts';
import type { SchedulerDouble } from './fixtures/scheduler-double.ts';
import { INITIALIZE, listen, post, stopServer } from './harness.ts';
import { until } from './until.ts';

const CHECK_MS = 200;
const call = (id: number, tool: string) => ({
  jsonrpc: '2.0',
  id,
  method: 'tools/call',
  params: { name: tool, arguments: {} },
});

interface Replica {
  readonly name: string;
  url: string;
  frozen: boolean;
  /** MCP requests it received, frozen or not. */
  readonly received: string[];
  /** The `/healthz` checks it was asked. */
  checks: number;
  thaw(): void;
  close(): Promise<void>;
}

/**
 * A replica stand-in granting relays (or, `direct`, a runtime answering on
 * its own listener); a request whose body names the tool `freeze` freezes
 * it on arrival.
 */
function replica(name: string, direct = false): Replica {
  const held: Array<() => void> = [];
  const self: Replica = {
    name,
    url: '',
    frozen: false,
    received: [],
    checks: 0,
    thaw() {
      self.frozen = false;
      for (const answer of held.splice(0)) answer();
    },
    async close() {
      outer.closeAllConnections();
      for (const socket of relays) socket.destroy();
      await new Promise((resolve) => outer.close(resolve));
    },
  };
  const answerOrHold = (answer: () => void): void => (self.frozen ? void held.push(answer) : answer());
  /** The runtime behind the relays: answers each JSON-RPC request with the replica's name. */
  const runtime = http.createServer((req, res) => {
    let body = '';
    req.on('data', (chunk: Buffer) => (body += chunk.toString('utf8')));
    req.on('end', () => {
      self.received.push(body);
      if (body.includes('"freeze"')) self.frozen = true;
      const message = JSON.parse(body) as { id: number };
      const session = req.headers['x-switchyard-session-id'];
      answerOrHold(() => {
        res.writeHead(200, { 'content-type': 'application/json', ...(session ? { 'mcp-session-id': session } : {}) });
        res.end(JSON.stringify({ jsonrpc: '2.0', id: message.id, result: { replica: name } }));
      });
    });
  });
  const relays = new Set<Socket>();
  const outer = http.createServer((req, res) => {
    if (req.url === '/healthz') {
      self.checks++;
      return answerOrHold(() => res.end('{"status":"ok"}'));
    }
    if (direct) return runtime.emit('request', req, res);
    res.writeHead(404).end();
  });
  outer.on('upgrade', (_req, socket: Socket) => {
    relays.add(socket);
    socket.write('HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: switchyard-relay\r\n\r\n');
    runtime.emit('connection', socket);
  });
  outer.listen(0, '127.0.0.1', () => (self.url = `http://127.0.0.1:${(outer.address() as AddressInfo).port}`));
  return self;
}

describe('a session whose scheduler replica goes silent', () => {
  // Started in before(), not as the suite is defined: a suite skipped by a name pattern runs no after() to stop them.
  let a: Replica;
  let b: Replica;
  const registry = new Registry();
  const lines: string[] = [];
  const log = (obj: object, msg?: string): void => void lines.push(msg ?? JSON.stringify(obj));
  let scheduler: SchedulerDouble;
  let gateway: Gateway;
  let url: string;
  let server: http.Server;
  before(async () => {
    a = replica('a');
    b = replica('b');
    while (!a.url || !b.url) await new Promise((resolve) => setTimeout(resolve, 5));
    scheduler = await startSchedulerDouble([{ id: 'rt-1', address: a.url }]);
    gateway = createGateway({
      schedulers: [scheduler.url],
      upstreamMode: 'proxy',
      upstreamCheckIntervalMs: CHECK_MS,
      // Long, so that only the checks can end a request held by a silent replica in time.
      idleTimeoutMs: 60_000,
      metrics: { registry, prefix: 'switchyard_gateway_' },
      logger: { info: log, warn: log, error: log, debug() {} },
    });
    ({ server, url } = await listen(gateway));
  });
  after(async () => {
    await stopServer(server);
    await gateway.close();
    await a.close();
    await b.close();
    await scheduler.close();
  });

  it('fails the request it held with a 502 within two checks, and the session follows its runtime', async () => {
    const opened = await post(url, INITIALIZE);
    assert.equal(opened.status, 200, JSON.stringify(opened.json));
    const session = { 'mcp-session-id': opened.headers.get('mcp-session-id')! };
    assert.deepEqual((await post(url, call(2, 'echo'), session)).json, {
      jsonrpc: '2.0',
      id: 2,
      result: { replica: 'a' },
    });

    // Replica a freezes with this request on it; its runtime shows through b.
    const started = performance.now();
    const held = post(url, call(3, 'freeze'), session);
    while (!a.frozen) await new Promise((resolve) => setTimeout(resolve, 5));
    scheduler.runtimes = [{ id: 'rt-1', address: b.url }];
    const cut = await held;
    const waited = performance.now() - started;
    assert.equal(cut.status, 502);
    assert.match(JSON.stringify(cut.json), /the scheduler replica carrying this request stopped answering/);
    assert.ok(waited < 3 * CHECK_MS + 500, `the held request waited ${waited.toFixed(0)} ms`);

    // The next request does not go to a (a relay there is not dialled): it follows the runtime to b.
    const followed = await post(url, call(4, 'echo'), session);
    assert.equal(followed.status, 200, JSON.stringify(followed.json));
    assert.deepEqual(followed.json, { jsonrpc: '2.0', id: 4, result: { replica: 'b' } });
    assert.equal(a.received.filter((body) => body.includes('"id":4')).length, 0);

    const metrics = await registry.metrics();
    assert.match(metrics, /switchyard_gateway_upstream_errors_total\{reason="silent"\} 1\n/);
    assert.equal(lines.filter((l) => l.includes('upstream stopped answering; closed its connections')).length, 1);
  });

  it('dials the replica again once it answers', async () => {
    a.thaw();
    const back = 'upstream answers again; it is dialled again';
    for (let i = 0; i < 100 && !lines.includes(back); i++) await new Promise((resolve) => setTimeout(resolve, 20));
    assert.ok(lines.includes(back), lines.join('\n'));
    // A new session placed on a is served there.
    scheduler.runtimes = [{ id: 'rt-1', address: a.url }];
    const opened = await post(url, INITIALIZE);
    assert.equal(opened.status, 200);
    const session = { 'mcp-session-id': opened.headers.get('mcp-session-id')! };
    assert.deepEqual((await post(url, call(5, 'echo'), session)).json, {
      jsonrpc: '2.0',
      id: 5,
      result: { replica: 'a' },
    });
  });
});

describe('a session whose runtime goes silent, in direct mode', () => {
  // Started in before(), not as the suite is defined: a suite skipped by a name pattern runs no after() to stop them.
  let c: Replica;
  let d: Replica;
  let scheduler: SchedulerDouble;
  let gateway: Gateway;
  let url: string;
  let server: http.Server;
  before(async () => {
    c = replica('c', true);
    d = replica('d', true);
    while (!c.url || !d.url) await new Promise((resolve) => setTimeout(resolve, 5));
    scheduler = await startSchedulerDouble([{ id: 'rt-c', address: c.url }]);
    gateway = createGateway({
      schedulers: [scheduler.url],
      upstreamMode: 'direct',
      upstreamCheckIntervalMs: CHECK_MS,
      idleTimeoutMs: 60_000,
    });
    ({ server, url } = await listen(gateway));
  });
  after(async () => {
    await stopServer(server);
    await gateway.close();
    c.thaw();
    await c.close();
    await d.close();
    await scheduler.close();
  });

  it('fails the request it held with a 502, then loses the session (404) at once, as with a dead runtime', async () => {
    const opened = await post(url, INITIALIZE);
    assert.equal(opened.status, 200, JSON.stringify(opened.json));
    const session = { 'mcp-session-id': opened.headers.get('mcp-session-id')! };
    const started = performance.now();
    const held = post(url, call(2, 'freeze'), session);
    while (!c.frozen) await new Promise((resolve) => setTimeout(resolve, 5));
    scheduler.runtimes = [{ id: 'rt-d', address: d.url }];
    const cut = await held;
    const waited = performance.now() - started;
    assert.equal(cut.status, 502);
    assert.match(JSON.stringify(cut.json), /the runtime stopped answering/);
    assert.ok(waited < 3 * CHECK_MS + 500, `the held request waited ${waited.toFixed(0)} ms`);

    const lostAt = performance.now();
    const lost = await post(url, call(3, 'echo'), session);
    assert.equal(lost.status, 404, JSON.stringify(lost.json));
    assert.ok(performance.now() - lostAt < 1000, 'not dialled: the runtime is known to be silent');
    assert.equal(c.received.filter((body) => body.includes('"id":3')).length, 0);

    const again = await post(url, INITIALIZE);
    assert.equal(again.status, 200);
    const next = { 'mcp-session-id': again.headers.get('mcp-session-id')! };
    assert.deepEqual((await post(url, call(4, 'echo'), next)).json, {
      jsonrpc: '2.0',
      id: 4,
      result: { replica: 'd' },
    });
  });
});

describe('the upstream check interval', () => {
  // On a manual clock a check waits on a timer, which the gateway sets once it holds a connection to an upstream.
  it('takes 0 to turn the checks off: an upstream it holds a connection to is never asked /healthz', async () => {
    for (const intervalMs of [CHECK_MS, 0]) {
      const upstream = replica(`checked-every-${intervalMs}`, true);
      await until(() => upstream.url !== '', 'the upstream listening');
      const scheduler = await startSchedulerDouble([{ id: 'rt-e', address: upstream.url }]);
      const clock = new ManualClock();
      const gateway = createGateway({
        schedulers: [scheduler.url],
        upstreamMode: 'direct',
        upstreamCheckIntervalMs: intervalMs,
        clock,
      });
      const { server, url } = await listen(gateway);
      try {
        assert.equal((await post(url, INITIALIZE)).status, 200);
        await clock.advance(10 * CHECK_MS);
        if (intervalMs > 0) {
          // The control: with checks on, the same steps get the upstream asked.
          await until(() => upstream.checks > 0, 'a check with checks on');
        } else {
          assert.equal(clock.pendingTimers, 0, 'no check is waiting to be made');
          assert.equal((await post(url, INITIALIZE)).status, 200);
          assert.equal(upstream.checks, 0, 'the upstream was never asked /healthz');
        }
      } finally {
        await stopServer(server);
        await gateway.close();
        await scheduler.close();
        await upstream.close();
      }
    }
  });

  it('refuses a negative interval', () => {
    assert.throws(
      () => createGateway({ schedulers: ['http://127.0.0.1:1'], upstreamCheckIntervalMs: -5 }),
      /upstreamCheckIntervalMs must be a positive integer/,
    );
  });
});
