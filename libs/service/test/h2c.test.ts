// HTTP/1.1 and HTTP/2 with prior knowledge on one real listening port.
import assert from 'node:assert/strict';
import { once } from 'node:events';
import http from 'node:http';
import http2 from 'node:http2';
import net from 'node:net';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import WebSocket, { WebSocketServer } from 'ws';
import { serveH2c, type H2cListener } from '../src/index.ts';

describe('serveH2c', () => {
  let server: http.Server;
  let h2c: H2cListener;
  let base: string;
  const held: http2.ServerHttp2Stream[] = [];

  before(async () => {
    server = http.createServer((req, res) => {
      let bytes = 0;
      req.on('data', (chunk: Buffer) => (bytes += chunk.length));
      req.on('end', () => res.end(`http/${req.httpVersion} ${req.method} ${bytes}`));
    });
    const sockets = new WebSocketServer({ noServer: true });
    server.on('upgrade', (req, socket, head) =>
      sockets.handleUpgrade(req, socket, head, (ws) => ws.on('message', (data: Buffer) => ws.send(`echo ${data}`))),
    );
    h2c = serveH2c(server, {
      maxConcurrentStreams: 100,
      onStream: (stream, headers) => {
        if (headers[':path'] === '/hold') {
          stream.respond({ ':status': 200, 'content-type': 'text/event-stream' });
          return void held.push(stream);
        }
        stream.respond({ ':status': 200 });
        stream.end(`h2 ${headers[':method']} ${headers[':path']}`);
      },
    });
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  after(async () => {
    server.closeAllConnections();
    await Promise.all([new Promise((r) => server.close(r)), h2c.close(100)]);
  });

  it('serves HTTP/1.1 requests, bodies and keep-alive as before', async () => {
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    const ask = (method: string, body?: string): Promise<string> =>
      new Promise((resolve, reject) => {
        const req = http.request(`${base}/x`, { method, agent }, (res) => {
          let text = '';
          res.on('data', (c: Buffer) => (text += c.toString()));
          res.once('end', () => resolve(text));
        });
        req.once('error', reject);
        req.end(body);
      });
    assert.equal(await ask('GET'), 'http/1.1 GET 0');
    assert.equal(await ask('POST', 'x'.repeat(100_000)), 'http/1.1 POST 100000');
    assert.equal(await ask('GET'), 'http/1.1 GET 0');
    agent.destroy();
  });

  it('passes WebSocket upgrades to the HTTP/1.1 server', async () => {
    const ws = new WebSocket(`${base.replace('http', 'ws')}/ws`);
    await once(ws, 'open');
    ws.send('hi');
    const [reply] = (await once(ws, 'message')) as [Buffer];
    assert.equal(reply.toString(), 'echo hi');
    ws.close();
  });

  it('serves HTTP/2 streams on the same port, many on one connection', async () => {
    const session = http2.connect(base);
    try {
      const bodies = await Promise.all(
        ['/a', '/b', '/c'].map(async (path) => {
          const stream = session.request({ ':path': path });
          let text = '';
          stream.on('data', (c: Buffer) => (text += c.toString()));
          await once(stream, 'end');
          return text;
        }),
      );
      assert.deepEqual(bodies, ['h2 GET /a', 'h2 GET /b', 'h2 GET /c']);
      assert.equal(h2c.sessions, 1);
    } finally {
      session.close();
    }
  });

  it('hands a connection that is neither to HTTP/1.1, which answers 400', async () => {
    const socket = net.connect(Number(new URL(base).port), '127.0.0.1');
    socket.end('PRX garbage\r\n\r\n');
    let text = '';
    socket.on('data', (c: Buffer) => (text += c.toString()));
    await once(socket, 'close');
    assert.match(text, /^HTTP\/1\.1 400/);
  });

  it('drops at once a connection its peer closed before saying which protocol it speaks', async () => {
    const socket = net.connect(Number(new URL(base).port), '127.0.0.1');
    socket.on('error', () => {});
    await once(socket, 'connect');
    socket.end();
    // Our side gets 'close' once the server ends its own; the sniff timeout is 10 s here.
    const closed = once(socket, 'close');
    const timer = setTimeout(() => socket.emit('error', new Error('still held by the server after 2 s')), 2000);
    try {
      await closed;
    } finally {
      clearTimeout(timer);
    }
  });

  it('close() drops a connection that has not said which protocol it speaks', async () => {
    // A listener of its own: the shared one's close() is the last test's.
    const other = http.createServer();
    const listener = serveH2c(other, { maxConcurrentStreams: 1, onStream: () => {} });
    other.listen(0, '127.0.0.1');
    await once(other, 'listening');
    const silent = net.connect((other.address() as AddressInfo).port, '127.0.0.1');
    await once(silent, 'connect');
    const dropped = once(silent, 'close');
    const started = performance.now();
    await listener.close(1000);
    await dropped;
    assert.ok(performance.now() - started < 1000, 'dropped at once, not at the sniff timeout');
    await new Promise((resolve) => other.close(resolve));
  });

  it('keeps a connection whose peer cancels more streams at once than a rapid-reset guard allows', async () => {
    // A listener of its own, with room for every stream at once (nghttp2 closes past 1,000 resets by default).
    const other = http.createServer();
    const listener = serveH2c(other, {
      maxConcurrentStreams: 2000,
      onStream: (stream, headers) => {
        stream.on('error', () => {});
        stream.respond({ ':status': 200 });
        if (headers[':path'] !== '/hold') stream.end('still here');
      },
    });
    other.listen(0, '127.0.0.1');
    await once(other, 'listening');
    const session = http2.connect(`http://127.0.0.1:${(other.address() as AddressInfo).port}`);
    let failed: unknown;
    session.on('error', (error) => (failed = error));
    try {
      const streams = await Promise.all(
        Array.from({ length: 1500 }, async () => {
          const stream = session.request({ ':path': '/hold' });
          stream.on('error', () => {});
          await once(stream, 'response');
          return stream;
        }),
      );
      for (const stream of streams) stream.close(http2.constants.NGHTTP2_CANCEL);
      await new Promise((resolve) => setTimeout(resolve, 200));
      const next = session.request({ ':path': '/next' });
      let body = '';
      next.on('data', (chunk: Buffer) => (body += chunk.toString()));
      await once(next, 'end');
      assert.equal(body, 'still here');
      assert.equal(failed, undefined);
    } finally {
      session.destroy();
      await listener.close(100);
      await new Promise((resolve) => other.close(resolve));
    }
  });

  it('close() sends GOAWAY and cuts streams still open at the deadline', async () => {
    const session = http2.connect(base);
    session.on('error', () => {});
    const stream = session.request({ ':path': '/hold' });
    stream.on('error', () => {});
    const streamClosed = once(stream, 'close');
    await once(stream, 'response');
    const goaway = once(session, 'goaway');
    const started = performance.now();
    await h2c.close(200);
    assert.ok(performance.now() - started >= 150, 'waited for the open stream until the deadline');
    assert.equal(h2c.sessions, 0);
    await Promise.all([goaway, streamClosed]);
  });
});

// Connections opened and abandoned (a client gone without a FIN, a scan, a
// peer that sent the preface and nothing else) must not be held for ever:
// HTTP/1.1 has its keep-alive timeout, HTTP/2 connections without a stream
// have idleTimeoutMs. A connection holding a stream, however silent, stays.
describe('serveH2c idle connections', () => {
  const IDLE_MS = 300;
  const SNIFF_MS = 400;
  let server: http.Server;
  let h2c: H2cListener;
  let base: string;

  before(async () => {
    server = http.createServer((_req, res) => void res.end('http/1.1'));
    h2c = serveH2c(server, {
      maxConcurrentStreams: 100,
      idleTimeoutMs: IDLE_MS,
      sniffTimeoutMs: SNIFF_MS,
      onStream: (stream, headers) => {
        stream.respond({ ':status': 200, 'content-type': 'text/event-stream' });
        if (headers[':path'] !== '/hold') stream.end('done');
      },
    });
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  after(async () => {
    server.closeAllConnections();
    await Promise.all([new Promise((r) => server.close(r)), h2c.close(100)]);
  });

  /** Resolves with how long `emitter` took to emit 'close', or rejects after `limitMs`. */
  const closesWithin = async (emitter: NodeJS.EventEmitter, limitMs: number): Promise<number> => {
    const started = performance.now();
    const timer = setTimeout(() => emitter.emit('error', new Error(`still open after ${limitMs} ms`)), limitMs);
    try {
      await once(emitter, 'close');
    } finally {
      clearTimeout(timer);
    }
    return performance.now() - started;
  };

  it('closes a connection that sent the HTTP/2 preface and opened no stream', async () => {
    const socket = net.connect(Number(new URL(base).port), '127.0.0.1');
    socket.resume();
    await once(socket, 'connect');
    socket.write('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n');
    socket.write(Buffer.from([0, 0, 0, 4, 0, 0, 0, 0, 0])); // an empty SETTINGS frame
    await until(() => h2c.sessions === 1);
    await closesWithin(socket, 10 * IDLE_MS);
    await until(() => h2c.sessions === 0);
  });

  it('drops a connection trickling the HTTP/2 preface at the sniff deadline, not at its last byte', async () => {
    const socket = net.connect(Number(new URL(base).port), '127.0.0.1');
    socket.on('error', () => {});
    await once(socket, 'connect');
    // Each byte well inside the sniff timeout; all 20 (of the preface's 24) would take 2 s.
    const preface = 'PRI * HTTP/2.0\r\n\r\nSM\r\n';
    let sent = 0;
    const trickle = setInterval(() => {
      if (sent < preface.length && !socket.destroyed) socket.write(preface[sent++]!);
    }, SNIFF_MS / 4);
    try {
      const tookMs = await closesWithin(socket, 2.5 * SNIFF_MS);
      assert.ok(tookMs >= SNIFF_MS - 50, `dropped ${tookMs} ms after it connected, before the sniff timeout`);
      assert.ok(sent < preface.length, 'the whole trickle was taken');
    } finally {
      clearInterval(trickle);
      socket.destroy();
    }
  });

  it('keeps a connection while a silent stream is open, and closes it once idle after the stream ends', async () => {
    const session = http2.connect(base);
    session.on('error', () => {});
    const stream = session.request({ ':path': '/hold' });
    stream.on('error', () => {});
    await once(stream, 'response');
    await new Promise((resolve) => setTimeout(resolve, 3 * IDLE_MS));
    assert.equal(session.closed || session.destroyed, false, 'a connection with an open stream was closed');
    // A short request on it restarts nothing while the silent one stays open; closing that one makes the connection idle.
    const short = session.request({ ':path': '/short' });
    short.resume();
    await once(short, 'end');
    stream.close(http2.constants.NGHTTP2_CANCEL);
    const tookMs = await closesWithin(session, 10 * IDLE_MS);
    assert.ok(tookMs >= IDLE_MS - 50, `closed ${tookMs} ms after its last stream, before idleTimeoutMs`);
    await until(() => h2c.sessions === 0);
  });
});

async function until(ok: () => boolean, limitMs = 5000): Promise<void> {
  const deadline = performance.now() + limitMs;
  while (!ok()) {
    assert.ok(performance.now() < deadline, 'condition not reached');
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}
