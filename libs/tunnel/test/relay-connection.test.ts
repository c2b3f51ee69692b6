// Relay connections end to end on loopback: a real scheduler HTTP server
// (relayConnection on its upgrade), a real runtime dialer serving HTTP/1.1
// on CONNECT streams, and plain Node HTTP clients on the relayed socket.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createHook } from 'node:async_hooks';
import { once } from 'node:events';
import http2 from 'node:http2';
import type net from 'node:net';
import type { AddressInfo } from 'node:net';
import { TUNNEL_DEFAULTS, serveRelayConnections } from '../src/index.ts';
import type { TunnelDialer } from '../src/index.ts';
import { askRelay, exchangeRaw } from '../src/testing.ts';
import { within } from '@switchyard/clock/testing';
import { closesWithin, startRuntime, startScheduler } from './helpers.ts';
import type { Scheduler } from './helpers.ts';

/** Asks `scheduler` (the test helpers' relay route) for the relay to `runtime`. */
function ask(scheduler: Scheduler, runtime: string): ReturnType<typeof askRelay> {
  return askRelay(scheduler.port, `/relay/${runtime}`);
}

/** The `Keep-Alive` of the last answer `exchange` read. */
let keepAlive: string | undefined;

/** One HTTP/1.1 exchange on an already relayed socket. */
async function exchange(socket: net.Socket, path: string, body = ''): Promise<{ status: number; body: string }> {
  const method = body ? 'POST' : 'GET';
  const answer = await exchangeRaw(
    socket,
    `${method} ${path} HTTP/1.1\r\nHost: runtime\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
  );
  keepAlive = /keep-alive: (.*)/i.exec(answer.head)?.[1];
  return { status: answer.status, body: answer.body };
}

describe('relay connections', () => {
  let scheduler: Scheduler;
  let dialer: TunnelDialer;
  let legacy: TunnelDialer;
  const connections = new Set<unknown>();
  let cancelled = 0;

  before(async () => {
    scheduler = await startScheduler();
    ({ dialer } = await startRuntime(scheduler, 'rt-relay', () => {}, {
      relayHandler: (req, res) => {
        connections.add(req.socket);
        if (req.url === '/hold') {
          res.once('close', () => cancelled++);
          return void res.writeHead(200, { 'content-type': 'text/event-stream' }).flushHeaders();
        }
        let bytes = 0;
        req.on('data', (c: Buffer) => (bytes += c.length));
        req.once('end', () => res.end(JSON.stringify({ path: req.url, bytes })));
      },
    }));
    // A runtime of a release without relay connections.
    ({ dialer: legacy } = await startRuntime(scheduler, 'rt-legacy', (_req, res) => void res.end('tunnel')));
  });
  after(async () => {
    void dialer.close();
    void legacy.close();
    await scheduler.close();
  });

  it('carries one keep-alive connection to the runtime: several requests, both ways, on one stream', async () => {
    connections.clear();
    const { status, socket } = await ask(scheduler, 'rt-relay');
    assert.equal(status, 101);
    const first = await exchange(socket, '/a');
    const big = 'x'.repeat(5 * 1024 * 1024);
    const second = await exchange(socket, '/b', big);
    assert.deepEqual(JSON.parse(first.body), { path: '/a', bytes: 0 });
    assert.deepEqual(JSON.parse(second.body), { path: '/b', bytes: big.length });
    assert.equal(connections.size, 1, 'both requests arrived on one connection of the runtime');
    assert.equal(keepAlive, 'timeout=60', 'a relay is kept for a minute, and says so');
    socket.destroy();
  });

  it('refuses a runtime whose tunnel it does not hold with 502 "runtime not connected", and closes', async () => {
    const { status, text: head, socket } = await ask(scheduler, 'rt-nowhere');
    assert.equal(status, 502);
    assert.deepEqual(JSON.parse(head.slice(head.indexOf('\r\n\r\n') + 4)), {
      error: 'runtime not connected',
      runtime: 'rt-nowhere',
    });
    assert.ok(socket.readableEnded || socket.destroyed, 'the connection closed after the refusal');
  });

  it('refuses a runtime that does not serve relay connections with 501', async () => {
    const { status, text: head } = await ask(scheduler, 'rt-legacy');
    assert.equal(status, 501, head);
    assert.match(head, /does not accept relay connections/);
  });

  it('tells the runtime at once when the gateway leaves mid-request', async () => {
    const before = cancelled;
    const { socket } = await ask(scheduler, 'rt-relay');
    socket.write('GET /hold HTTP/1.1\r\nHost: runtime\r\n\r\n');
    const head = once(socket, 'data');
    socket.resume();
    await head;
    socket.destroy();
    const deadline = performance.now() + 2000;
    while (cancelled === before && performance.now() < deadline) await new Promise((r) => setTimeout(r, 10));
    assert.equal(cancelled, before + 1, "the runtime's response closed");
  });

  it('closes an idle relayed connection at once when the runtime goes away, not after the grace', async () => {
    const { dialer: leaving } = await startRuntime(scheduler, 'rt-leaving', () => {}, {
      relayHandler: (_req, res) => void res.end('ok'),
    });
    const { socket } = await ask(scheduler, 'rt-leaving');
    assert.deepEqual(await exchange(socket, '/x'), { status: 200, body: 'ok' });
    const started = performance.now();
    const ended = once(socket, 'end');
    socket.resume();
    void leaving.close();
    await ended;
    const elapsedMs = performance.now() - started;
    // The tunnel's GOAWAY grace is TUNNEL_DEFAULTS.closeGraceMs (1 s).
    assert.ok(elapsedMs < 500, `ended after ${elapsedMs.toFixed(0)} ms`);
  });

  it('answers a request in flight when the runtime goes away with Connection: close, then ends the relay', async () => {
    let answer: (() => void) | undefined;
    let arrive: () => void;
    const arrived = new Promise<void>((resolve) => (arrive = resolve));
    // Resolves once the scheduler holds its tunnel (the endpoint's onTunnel).
    const { dialer: leaving } = await startRuntime(scheduler, 'rt-leaving-busy', () => {}, {
      relayHandler: (_req, res) => {
        answer = () => void res.end('done');
        arrive();
      },
    });
    const { socket } = await ask(scheduler, 'rt-leaving-busy');
    const reply = exchangeRaw(socket, 'GET /slow HTTP/1.1\r\nHost: runtime\r\n\r\n');
    await within(arrived, 5000, 'the runtime had no /slow request');
    const closed = leaving.close();
    answer!();
    const { status, head } = await reply;
    assert.equal(status, 200);
    assert.match(head, /\r\nconnection: close(\r\n|$)/i, 'the gateway is told not to send another request on it');
    socket.destroy();
    await closed;
  });

  it('closes the relayed connection when the tunnel goes', async () => {
    const { socket } = await ask(scheduler, 'rt-relay');
    assert.deepEqual(JSON.parse((await exchange(socket, '/c')).body), { path: '/c', bytes: 0 });
    const closed = once(socket, 'close');
    scheduler.endpoint.get('rt-relay')!.close('test');
    await closed;
  });
});

// The runtime's HTTP/1.1 server on relay streams never listens (its
// connections are CONNECT streams), and Node checks headersTimeout and
// requestTimeout only for servers that do: a relay opened and abandoned, or
// one trickling a request, would hold its tunnel stream for ever. Here with
// a plain HTTP/2 server and client standing in for the tunnel's two ends.
describe('relay connections that send no request, or never finish one', () => {
  const LIMITS = { headersTimeoutMs: 300, requestTimeoutMs: 600, checkIntervalMs: 100 };
  let server: http2.Http2Server;
  let session: http2.ClientHttp2Session;
  let answered = 0;

  before(async () => {
    // With a request listener, as the runtime's: Node's compatibility layer, which emits 'connect', comes with it.
    server = http2.createServer((_req, res) => void res.writeHead(404).end());
    serveRelayConnections(
      server,
      (req, res) => {
        req.resume();
        req.once('end', () => (answered++, res.end('done')));
      },
      LIMITS,
    );
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    session = http2.connect(`http://127.0.0.1:${(server.address() as AddressInfo).port}`);
    session.on('error', () => {});
  });
  after(async () => {
    session.destroy();
    await new Promise((resolve) => server.close(resolve));
  });

  /** Opens a relay (a CONNECT stream) and writes `sent` on it; resolves once the runtime accepted it. */
  async function relay(sent: string): Promise<http2.ClientHttp2Stream> {
    const stream = session.request({ ':method': 'CONNECT', ':authority': 'runtime' });
    stream.on('error', () => {});
    stream.resume();
    await once(stream, 'response');
    if (sent) stream.write(sent);
    return stream;
  }

  it('closes a relay that sends no request within headersTimeoutMs', async () => {
    const stream = await relay('');
    await closesWithin(stream, 20 * LIMITS.headersTimeoutMs);
  });

  it('closes a relay whose request headers never end', async () => {
    const stream = await relay('GET / HTTP/1.1\r\nHost: runtime\r\nX-Slow: ');
    await closesWithin(stream, 20 * LIMITS.headersTimeoutMs);
  });

  it('closes a relay whose request body never ends within requestTimeoutMs', async () => {
    const stream = await relay('POST / HTTP/1.1\r\nHost: runtime\r\nContent-Length: 100\r\n\r\n{');
    await closesWithin(stream, 20 * LIMITS.requestTimeoutMs);
  });

  it('keeps a relay that is used within the limits, across requests', async () => {
    const stream = await relay('');
    let text = '';
    stream.on('data', (chunk: Buffer) => (text += chunk.toString()));
    for (let i = 0; i < 3; i++) {
      stream.write('POST / HTTP/1.1\r\nHost: runtime\r\nContent-Length: 2\r\n\r\n{}');
      for (let n = 0; text.split('done').length - 1 < i + 1 && n < 200; n++)
        await new Promise((r) => setTimeout(r, 10));
      // Idle between requests for longer than the header deadline: keep-alive, not a request being sent.
      await new Promise((r) => setTimeout(r, 2 * LIMITS.headersTimeoutMs));
    }
    assert.equal(text.split('done').length - 1, 3);
    assert.equal(answered, 3, 'the runtime read three whole requests, and none of the unfinished ones');
    assert.equal(stream.closed, false, 'a relay in use was closed');
    stream.close();
  });
});

// The deadline checks above run on an interval of the relay server's, which
// Node clears only in a server's close(). A runtime closing its dialer (a
// node stopped in a process that goes on: the CLI's local cluster, tests)
// must stop it, or it runs for the rest of the process holding the server
// and the runtime's handler.
describe('a closed dialer', () => {
  it('stops the deadline checks of its relay server', async () => {
    const scheduler = await startScheduler();
    /** Async ids of the check intervals created while the dialer is built, until each is cleared. */
    const checks = new Set<number>();
    let building = false;
    const hook = createHook({
      init(asyncId, type, _trigger, resource) {
        const repeat = (resource as { _repeat?: number | null })._repeat;
        if (building && type === 'Timeout' && repeat === TUNNEL_DEFAULTS.relayCheckIntervalMs) checks.add(asyncId);
      },
      destroy: (asyncId) => void checks.delete(asyncId),
    }).enable();
    try {
      building = true;
      const started = startRuntime(scheduler, 'rt-closes', () => {}, { relayHandler: (_req, res) => void res.end() });
      building = false;
      const { dialer } = await started;
      assert.equal(checks.size, 1, 'the relay server checks its deadlines on an interval');
      await dialer.close();
      // Destroy hooks run after the clearing, in a later turn: bounded polling.
      for (let i = 0; checks.size > 0 && i < 200; i++) await new Promise((r) => setTimeout(r, 5));
      assert.equal(checks.size, 0, 'the check interval still runs after the dialer closed');
    } finally {
      hook.disable();
      await scheduler.close();
    }
  });
});
