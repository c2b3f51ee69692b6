// Relay connections end to end on loopback: a real scheduler HTTP server
// (relayConnection on its upgrade), a real runtime dialer serving HTTP/1.1
// on CONNECT streams, and plain Node HTTP clients on the relayed socket.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { once } from 'node:events';
import type net from 'node:net';
import type { TunnelDialer } from '../src/index.ts';
import { askRelay, exchangeRaw } from '../src/testing.ts';
import { startRuntime, startScheduler } from './helpers.ts';
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
    dialer.close();
    legacy.close();
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
    const deadline = Date.now() + 2000;
    while (cancelled === before && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
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
    leaving.close();
    await ended;
    const elapsedMs = performance.now() - started;
    // The tunnel's GOAWAY grace is TUNNEL_DEFAULTS.closeGraceMs (1 s).
    assert.ok(elapsedMs < 500, `ended after ${elapsedMs.toFixed(0)} ms`);
  });

  it('answers a request in flight when the runtime goes away with Connection: close, then ends the relay', async () => {
    let answer: (() => void) | undefined;
    const arrived = new Promise<void>((resolve) => {
      void startRuntime(scheduler, 'rt-leaving-busy', () => {}, {
        relayHandler: (_req, res) => {
          answer = () => void res.end('done');
          resolve();
        },
      }).then(({ dialer: d }) => (leaving = d));
    });
    let leaving: TunnelDialer | undefined;
    while (!scheduler.endpoint.get('rt-leaving-busy')) await new Promise((r) => setTimeout(r, 10));
    const { socket } = await ask(scheduler, 'rt-leaving-busy');
    const reply = exchangeRaw(socket, 'GET /slow HTTP/1.1\r\nHost: runtime\r\n\r\n');
    await arrived;
    const closed = leaving!.close();
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
