import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { once } from 'node:events';
import http from 'node:http';
import net from 'node:net';
import type { AddressInfo } from 'node:net';
import { FORWARDED_HEADER } from '@switchyard/protocol';
import { proxyToTunnel } from '../src/index.ts';
import type { TunnelDialer } from '../src/index.ts';
import WebSocket from 'ws';
import { TOKEN, encodeInfo, httpRequest, runtimeInfo, startRuntime, startScheduler } from './helpers.ts';
import type { Scheduler } from './helpers.ts';

/** What `/flood` offers: far more than every buffer on the way (stream window, sockets) holds. */
const FLOOD_BYTES = 64 * 1024 * 1024;
const FLOOD_CHUNK = Buffer.alloc(64 * 1024, 'f');

describe('proxyToTunnel', () => {
  let scheduler: Scheduler;
  /** The runtime's `/flood` writer: bytes offered so far, and whether it waits for 'drain'. */
  const flood = { offered: 0, waiting: false };
  let dialer: TunnelDialer;
  let proxy: http.Server;
  let base: string;
  let resetAfter = (): void => {};

  before(async () => {
    scheduler = await startScheduler();
    ({ dialer } = await startRuntime(scheduler, 'rt-p', (req, res) => {
      if (req.url === '/headers') {
        res.setHeader('content-type', 'application/json');
        res.setHeader('x-upstream', 'yes');
        // A runtime posing as a scheduler that forwarded the request: the proxy drops that header.
        res.setHeader(FORWARDED_HEADER, '1');
        return void res.end(JSON.stringify({ ...req.headers }));
      }
      if (req.url === '/count') {
        let bytes = 0;
        req.on('data', (c: Buffer) => (bytes += c.length));
        return void req.once('end', () => res.end(String(bytes)));
      }
      if (req.url === '/refuse-late') {
        // Answers a large upload without reading it, once the proxy is waiting for the stream window.
        return void setTimeout(() => res.writeHead(413, { 'content-type': 'text/plain' }).end('too large'), 200);
      }
      if (req.url === '/reset-before') return void res.stream.close(2);
      if (req.url === '/reset-after') {
        res.writeHead(200);
        res.write('partial');
        return void (resetAfter = () => res.stream.close(2));
      }
      if (req.url === '/trailers') {
        res.addTrailers({ 'x-checksum': 'abc' });
        return void res.end('body');
      }
      if (req.url === '/slow') {
        res.write('a');
        return void setTimeout(() => res.end('b'), 20);
      }
      if (req.url === '/flood') {
        res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': FLOOD_BYTES });
        const pump = (): void => {
          flood.waiting = false;
          while (flood.offered < FLOOD_BYTES) {
            flood.offered += FLOOD_CHUNK.length;
            if (!res.write(FLOOD_CHUNK)) return void ((flood.waiting = true), res.once('drain', pump));
          }
          res.end();
        };
        return pump();
      }
      if (req.url === '/silent') {
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        return;
      }
      res.end('plain');
    }));
    proxy = http.createServer((req, res) => {
      const runtimeId = (req.url ?? '').split('/')[1]!;
      const path = (req.url ?? '').slice(runtimeId.length + 1);
      proxyToTunnel(scheduler.endpoint.get(runtimeId), req, res, path, {
        runtimeId,
        extraHeaders: { 'x-switchyard-process': 'p1' },
      });
    });
    proxy.listen(0, '127.0.0.1');
    await once(proxy, 'listening');
    base = `http://127.0.0.1:${(proxy.address() as AddressInfo).port}`;
  });
  after(async () => {
    void dialer.close();
    proxy.closeAllConnections();
    proxy.close();
    await scheduler.close();
  });

  it("strips hop-by-hop headers, maps Host to :authority and adds extra headers; answers lose a scheduler's header", async () => {
    const reply = await httpRequest(`${base}/rt-p/headers`, {
      headers: {
        host: 'example.test:8080',
        connection: 'keep-alive, x-hop',
        'keep-alive': 'timeout=5',
        'x-hop': 'drop me',
        'proxy-authorization': 'Basic abc',
        te: 'trailers, deflate',
        'x-end': 'keep me',
      },
    });
    const seen = JSON.parse(reply.body) as Record<string, string>;
    assert.equal(seen[':authority'], 'example.test:8080');
    assert.equal(seen['x-end'], 'keep me');
    assert.equal(seen['x-switchyard-process'], 'p1');
    assert.equal(seen.te, 'trailers');
    for (const name of ['connection', 'keep-alive', 'x-hop', 'proxy-authorization', 'host']) {
      assert.equal(seen[name], undefined, `${name} must not be forwarded`);
    }
    assert.equal(reply.headers['x-upstream'], 'yes');
    assert.equal(reply.headers[FORWARDED_HEADER], undefined);
  });

  // 8 MiB is four stream windows: the proxy must wait for the runtime to read.
  for (const framing of ['chunked', 'declared length'] as const) {
    it(`streams a large request body to the runtime (${framing})`, async () => {
      const bytes = 8 * 1024 * 1024;
      const headers = framing === 'chunked' ? {} : { 'content-length': bytes };
      const reply = await new Promise<string>((resolve, reject) => {
        const req = http.request(`${base}/rt-p/count`, { method: 'POST', agent: false, headers }, (res) => {
          let body = '';
          res.on('data', (c: Buffer) => (body += c.toString()));
          res.once('end', () => resolve(body));
        });
        req.once('error', reject);
        const chunk = Buffer.alloc(64 * 1024, 1);
        for (let sent = 0; sent < bytes; sent += chunk.length) req.write(chunk);
        req.end();
      });
      assert.equal(reply, String(bytes));
    });
  }

  for (const framing of ['chunked', 'declared length'] as const) {
    it(`keeps the client connection usable when the runtime answers an upload it did not read (${framing})`, async () => {
      const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
      try {
        const bytes = 16 * 1024 * 1024;
        const headers = framing === 'chunked' ? {} : { 'content-length': bytes };
        const first = await new Promise<number>((resolve, reject) => {
          const req = http.request(`${base}/rt-p/refuse-late`, { method: 'POST', agent, headers }, (res) => {
            res.resume();
            res.once('end', () => resolve(res.statusCode ?? 0));
          });
          req.once('error', reject);
          req.end(Buffer.alloc(bytes, 1));
        });
        assert.equal(first, 413);
        // The next request on that connection (or on a new one, had the proxy closed it) is answered.
        const second = await Promise.race([
          new Promise<string>((resolve, reject) => {
            http
              .get(`${base}/rt-p/plain`, { agent }, (res) => {
                let body = '';
                res.on('data', (c: Buffer) => (body += c.toString()));
                res.once('end', () => resolve(body));
              })
              .once('error', reject);
          }),
          new Promise<string>((resolve) => setTimeout(() => resolve('no answer within 3 s'), 3000).unref()),
        ]);
        assert.equal(second, 'plain');
      } finally {
        agent.destroy();
      }
    });
  }

  const failures = [
    { name: 'an unknown runtime is a 502 naming it', path: '/rt-none/x', status: 502, error: 'runtime not connected' },
    {
      name: 'a stream reset before headers is a 502',
      path: '/rt-p/reset-before',
      status: 502,
      error: 'runtime stream failed',
    },
  ];
  for (const c of failures) {
    it(c.name, async () => {
      const reply = await httpRequest(`${base}${c.path}`);
      assert.equal(reply.status, c.status);
      assert.equal(JSON.parse(reply.body).error, c.error);
    });
  }

  // A reply complete within one turn is framed as the runtime's own HTTP/1.1 server would frame it.
  interface Framing {
    readonly body: string;
    readonly length: string | undefined;
    readonly chunked: boolean;
    readonly checksum: string | undefined;
  }
  const framing: { name: string; method: string; path: string; want: Framing }[] = [
    {
      name: 'a reply that ends within one turn gets a Content-Length instead of chunked framing',
      method: 'GET',
      path: '/plain',
      want: { body: 'plain', length: '5', chunked: false, checksum: undefined },
    },
    {
      name: 'a HEAD reply carries the length of the body it would have and no body',
      method: 'HEAD',
      path: '/plain',
      want: { body: '', length: '5', chunked: false, checksum: undefined },
    },
    {
      name: 'a reply with trailers stays chunked and carries them',
      method: 'GET',
      path: '/trailers',
      want: { body: 'body', length: undefined, chunked: true, checksum: 'abc' },
    },
    {
      name: 'a reply that spans turns streams chunked',
      method: 'GET',
      path: '/slow',
      want: { body: 'ab', length: undefined, chunked: true, checksum: undefined },
    },
  ];
  for (const c of framing) {
    it(c.name, async () => {
      const got = await new Promise<Framing>((resolve, reject) => {
        const req = http.request(
          `${base}/rt-p${c.path}`,
          { method: c.method, agent: false, headers: { te: 'trailers' } },
          (res) => {
            let body = '';
            res.on('data', (chunk: Buffer) => (body += chunk.toString()));
            res.once('end', () =>
              resolve({
                body,
                length: res.headers['content-length'],
                chunked: res.headers['transfer-encoding'] === 'chunked',
                checksum: res.trailers['x-checksum'],
              }),
            );
          },
        );
        req.once('error', reject);
        req.end();
      });
      assert.deepEqual(got, c.want);
    });
  }

  // A hand-written HTTP/2 peer decides which frames share one WebSocket message (one read on the scheduler).
  const status200 = Buffer.from([0x88]); // HPACK static index 8: ":status: 200"
  const rawAnswers = [
    {
      name: 'answers 502 when a reset arrives in the same read as the headers (nothing reached the client yet)',
      frames: (id: number) => [
        frame(FRAME.headers, END_HEADERS, id, status200),
        frame(FRAME.data, 0, id, Buffer.from('partial')),
        frame(FRAME.rstStream, 0, id, Buffer.from([0, 0, 0, 2])),
      ],
      want: { status: 502, length: 'absent', body: '{"error":"runtime stream failed","runtime":"raw-1"}' },
    },
    {
      name: 'gives a Content-Length to an undeclared body that ends in the same read as the headers',
      frames: (id: number) => [
        frame(FRAME.headers, END_HEADERS, id, status200),
        frame(FRAME.data, END_STREAM, id, Buffer.from('whole')),
      ],
      want: { status: 200, length: '5', body: 'whole' },
    },
    {
      name: 'completes a reply with a declared length at its last byte, without waiting for END_STREAM',
      frames: (id: number) => [
        // ":status: 200", then "content-length: 5" as a literal with static name index 28.
        frame(FRAME.headers, END_HEADERS, id, Buffer.from([0x88, 0x0f, 0x0d, 0x01, 0x35])),
        frame(FRAME.data, 0, id, Buffer.from('whole')),
      ],
      want: { status: 200, length: '5', body: 'whole' },
    },
    {
      // Node's HTTP/2 takes the overrun for an error of the whole session, so the tunnel goes with it.
      name: 'answers 502 "not connected" when the body overruns its declared length (the tunnel is torn down)',
      frames: (id: number) => [
        // ":status: 200", then "content-length: 3".
        frame(FRAME.headers, END_HEADERS, id, Buffer.from([0x88, 0x0f, 0x0d, 0x01, 0x33])),
        frame(FRAME.data, END_STREAM, id, Buffer.from('whole')),
      ],
      want: { status: 502, length: 'absent', body: '{"error":"runtime not connected","runtime":"raw-4"}' },
    },
  ];
  rawAnswers.forEach((c, i) => {
    it(c.name, { timeout: 5000 }, async () => {
      const id = `raw-${i + 1}`;
      const accepted = scheduler.nextTunnel(id);
      const ws = new WebSocket(`${scheduler.url.replace('http', 'ws')}/api/runtime/connect`, {
        headers: { authorization: `Bearer ${TOKEN}`, 'x-runtime-info': encodeInfo(runtimeInfo(id)) },
        perMessageDeflate: false,
      });
      try {
        ws.once('open', () => ws.send(frame(FRAME.settings, 0, 0)));
        answerEveryRequest(ws, (streamId) => Buffer.concat(c.frames(streamId)));
        await accepted;
        const reply = await httpRequest(`${base}/${id}/x`);
        const length = reply.status === 502 ? 'absent' : reply.headers['content-length'];
        assert.deepEqual({ status: reply.status, length, body: reply.body }, c.want);
      } finally {
        ws.terminate();
      }
    });
  });

  it('sends a short body of declared length with its HEADERS and END_STREAM in one tunnel message', async () => {
    const id = 'raw-body';
    const accepted = scheduler.nextTunnel(id);
    const ws = new WebSocket(`${scheduler.url.replace('http', 'ws')}/api/runtime/connect`, {
      headers: { authorization: `Bearer ${TOKEN}`, 'x-runtime-info': encodeInfo(runtimeInfo(id)) },
      perMessageDeflate: false,
    });
    const messages: SeenFrame[][] = [];
    try {
      ws.once('open', () => ws.send(frame(FRAME.settings, 0, 0)));
      answerEveryRequest(
        ws,
        (streamId) => frame(FRAME.headers, END_HEADERS | END_STREAM, streamId, status200),
        (frames) => messages.push(frames),
      );
      await accepted;
      const reply = await httpRequest(`${base}/${id}/x`, { method: 'POST', body: '{"jsonrpc":"2.0"}' });
      assert.equal(reply.status, 200);
      const request = messages.filter((m) => m.some((f) => f.streamId !== 0));
      assert.equal(request.length, 1, `the request crossed in ${request.length} messages`);
      assert.deepEqual(
        request[0]!.filter((f) => f.streamId !== 0).map((f) => [f.type, f.flags & END_STREAM]),
        [
          [FRAME.headers, 0],
          [FRAME.data, END_STREAM],
        ],
      );
    } finally {
      ws.terminate();
    }
  });

  it('flushes the headers of a stream that sends no body yet (an idle SSE stream)', async () => {
    const res = await new Promise<http.IncomingMessage>((resolve, reject) => {
      http.get(`${base}/rt-p/silent`, { agent: false }, resolve).once('error', reject);
    });
    assert.equal(res.statusCode, 200);
    assert.equal(res.headers['content-type'], 'text/event-stream');
    res.destroy();
  });

  it('holds the runtime back while the client reads nothing, then delivers every byte', async () => {
    const socket = net.connect(Number(new URL(base).port), '127.0.0.1');
    await once(socket, 'connect');
    // A client that sends its request and stops reading.
    socket.pause();
    socket.write('GET /rt-p/flood HTTP/1.1\r\nHost: x\r\n\r\n');
    try {
      // Stalled = the runtime waits for 'drain' and its offer has not moved for a while (bounded wait).
      let stalledAt = -1;
      for (let stable = 0, i = 0; stable < 3 && i < 100; i++) {
        await new Promise((r) => setTimeout(r, 100));
        stable = flood.waiting && flood.offered === stalledAt ? stable + 1 : 0;
        stalledAt = flood.offered;
      }
      assert.ok(flood.waiting, 'the runtime stalls on backpressure');
      // The stream window (2 MiB) and the socket buffers on either side of the proxy, not the whole answer.
      assert.ok(stalledAt < 16 * 1024 * 1024, `the runtime offered ${stalledAt} bytes to a client reading nothing`);
      let received = 0;
      socket.on('data', (chunk: Buffer) => (received += chunk.length));
      socket.resume();
      for (let i = 0; received < FLOOD_BYTES && i < 1000; i++) await new Promise((r) => setTimeout(r, 20));
      assert.ok(received > FLOOD_BYTES, `the client got ${received} bytes: headers and the whole body`);
      assert.equal(flood.offered, FLOOD_BYTES);
    } finally {
      socket.destroy();
    }
  });

  it('destroys the client response when the stream resets after headers', async () => {
    const res = await new Promise<http.IncomingMessage>((resolve, reject) => {
      http.get(`${base}/rt-p/reset-after`, { agent: false }, resolve).once('error', reject);
    });
    assert.equal(res.statusCode, 200);
    resetAfter();
    const outcome = await new Promise<string>((resolve) => {
      res.resume();
      res.once('end', () => resolve('end'));
      res.once('aborted', () => resolve('aborted'));
      res.once('error', () => resolve('error'));
    });
    assert.notEqual(outcome, 'end');
  });
});

const FRAME = { data: 0, headers: 1, rstStream: 3, settings: 4 } as const;
const END_STREAM = 0x1;
const END_HEADERS = 0x4;
const SETTINGS_ACK = 0x1;
const PREFACE = 'PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n';

function frame(type: number, flags: number, streamId: number, payload = Buffer.alloc(0)): Buffer {
  const head = Buffer.alloc(9);
  head.writeUIntBE(payload.length, 0, 3);
  head[3] = type;
  head[4] = flags;
  head.writeUInt32BE(streamId, 5);
  return Buffer.concat([head, payload]);
}

interface SeenFrame {
  readonly type: number;
  readonly flags: number;
  readonly streamId: number;
}

/**
 * Acknowledges the client's SETTINGS and answers each request's HEADERS with
 * `answer(streamId)`, as one message. `onMessage` gets the frames each
 * message from the scheduler completed.
 */
function answerEveryRequest(
  ws: WebSocket,
  answer: (streamId: number) => Buffer,
  onMessage: (frames: SeenFrame[]) => void = () => {},
): void {
  let pending = Buffer.alloc(0);
  ws.on('message', (data: Buffer) => {
    pending = Buffer.concat([pending, data]);
    if (pending.subarray(0, PREFACE.length).toString('latin1') === PREFACE) pending = pending.subarray(PREFACE.length);
    const seen: SeenFrame[] = [];
    while (pending.length >= 9) {
      const length = pending.readUIntBE(0, 3);
      if (pending.length < 9 + length) break;
      const [type, flags] = [pending[3]!, pending[4]!];
      const streamId = pending.readUInt32BE(5) & 0x7fffffff;
      pending = pending.subarray(9 + length);
      seen.push({ type, flags, streamId });
      if (type === FRAME.settings && !(flags & SETTINGS_ACK)) ws.send(frame(FRAME.settings, SETTINGS_ACK, 0));
      if (type === FRAME.headers) ws.send(answer(streamId));
    }
    onMessage(seen);
  });
}
