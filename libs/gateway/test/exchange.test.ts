// The relay on real sockets. Backpressure: an upstream that writes as fast
// as it may, a client that stops reading; the upstream must be held to
// about what socket buffers hold, and every byte must still arrive. Heads:
// what of the upstream's response head the client sees, for an event stream
// that stays silent and for a whole answer. Idle: an answer that stops part
// way is cut.
import assert from 'node:assert/strict';
import { once } from 'node:events';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import net from 'node:net';
import { after, before, describe, it } from 'node:test';
import { Agent, request } from 'undici';
import { exchange } from '../src/exchange.ts';

const TOTAL = 64 * 1024 * 1024;
const CHUNK = Buffer.alloc(64 * 1024, 0x61);

const portOf = (server: http.Server): number => (server.address() as AddressInfo).port;

/** An upstream server answering with `handler`, and in front of it a server relaying each request there through `exchange`. */
async function relayPair(
  handler: http.RequestListener,
  idleTimeoutMs = 60_000,
): Promise<{ origin: string; close(): Promise<void> }> {
  const upstream = http.createServer(handler);
  upstream.listen(0, '127.0.0.1');
  await once(upstream, 'listening');
  const agent = new Agent();
  const base = `http://127.0.0.1:${portOf(upstream)}`;
  const front = http.createServer((req, res) => {
    const call = { url: `${base}${req.url}`, method: 'GET' as const, headers: {}, idleTimeoutMs: 60_000 };
    void exchange(agent, { ...call, signal: new AbortController().signal }, res).then((answer) =>
      answer.relay(res, idleTimeoutMs, () => {}),
    );
  });
  front.listen(0, '127.0.0.1');
  await once(front, 'listening');
  return {
    origin: `http://127.0.0.1:${portOf(front)}`,
    async close() {
      for (const server of [front, upstream]) {
        server.closeAllConnections();
        server.close();
      }
      await agent.close();
    },
  };
}

describe('exchange relay backpressure', () => {
  let pair: Awaited<ReturnType<typeof relayPair>>;
  let written = 0;

  before(async () => {
    pair = await relayPair(async (_req, res) => {
      res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': TOTAL });
      while (written < TOTAL) {
        written += CHUNK.length;
        if (!res.write(CHUNK)) await once(res, 'drain');
      }
      res.end();
    });
  });
  after(() => pair.close());

  it('holds the upstream back while the client does not read, then delivers every byte', async () => {
    const socket = net.connect(Number(new URL(pair.origin).port), '127.0.0.1');
    await once(socket, 'connect');
    socket.pause();
    socket.write('GET /big HTTP/1.1\r\nhost: x\r\n\r\n');
    await new Promise((r) => setTimeout(r, 1000));
    const aheadWhilePaused = written;
    assert.ok(
      aheadWhilePaused < 16 * 1024 * 1024,
      `the upstream wrote ${(aheadWhilePaused / 2 ** 20).toFixed(1)} MiB of 64 while the client read nothing`,
    );
    let received = 0;
    socket.on('data', (chunk: Buffer) => (received += chunk.length));
    socket.resume();
    while (received < TOTAL) await new Promise((r) => setTimeout(r, 20));
    assert.equal(written, TOTAL);
    assert.ok(received >= TOTAL, 'headers and the whole body arrived');
    socket.destroy();
  });
});

describe('exchange relay heads', () => {
  let pair: Awaited<ReturnType<typeof relayPair>>;

  before(async () => {
    pair = await relayPair((req, res) => {
      const common = { connection: 'x-hop', 'x-hop': 'dropped', 'mcp-session-id': 's-1' };
      if (req.url === '/events') {
        // An event stream that sends its head and then nothing.
        res.writeHead(200, { ...common, 'content-type': 'text/event-stream', 'content-length': '1000' });
        res.flushHeaders();
        return;
      }
      res.writeHead(200, { ...common, 'content-type': 'application/json', 'content-length': '11' });
      res.end('{"ok":true}');
    });
  });
  after(() => pair.close());

  it('sends a silent event stream its head at once, unbuffered and without a length', async () => {
    const client = new Agent();
    try {
      const res = await request(`${pair.origin}/events`, { dispatcher: client, signal: AbortSignal.timeout(2000) });
      assert.equal(res.statusCode, 200);
      assert.equal(res.headers['content-type'], 'text/event-stream');
      assert.equal(res.headers['x-accel-buffering'], 'no');
      assert.equal(res.headers['mcp-session-id'], 's-1');
      assert.equal(res.headers['content-length'], undefined);
      assert.equal(res.headers['x-hop'], undefined, 'a header the upstream Connection lists is hop-by-hop');
      res.body.destroy();
    } finally {
      await client.destroy();
    }
  });

  it('sends a whole answer with its length and the headers a client may see', async () => {
    const res = await request(`${pair.origin}/answer`, { signal: AbortSignal.timeout(2000) });
    assert.equal(res.statusCode, 200);
    assert.equal(res.headers['content-length'], '11');
    assert.equal(res.headers['x-accel-buffering'], undefined);
    assert.equal(res.headers['mcp-session-id'], 's-1');
    assert.equal(res.headers['x-hop'], undefined);
    assert.deepEqual(await res.body.json(), { ok: true });
  });
});

describe('exchange relay idle timeout', () => {
  let pair: Awaited<ReturnType<typeof relayPair>>;
  const stalled: http.ServerResponse[] = [];

  before(async () => {
    pair = await relayPair((_req, res) => {
      // The head and the first bytes leave in one write; the rest never comes.
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': '1000' });
      res.write('{"partial":');
      stalled.push(res);
    }, 200);
  });
  after(async () => {
    for (const res of stalled) res.destroy();
    await pair.close();
  });

  it('cuts an answer whose body stops part way, once it was idle that long', async () => {
    const res = await request(`${pair.origin}/stalls`, { signal: AbortSignal.timeout(10_000) });
    assert.equal(res.statusCode, 200);
    await assert.rejects(
      res.body.text(),
      (error: Error) => error.name !== 'AbortError' && error.name !== 'TimeoutError',
    );
  });
});
