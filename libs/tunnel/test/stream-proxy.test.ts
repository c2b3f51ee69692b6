// proxyStreamToTunnel: an HTTP/2 front (as a scheduler serves gateways over
// h2c) relaying streams into a real tunnel to an in-process runtime.
import assert from 'node:assert/strict';
import { EventEmitter, once } from 'node:events';
import http2 from 'node:http2';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { FORWARDED_HEADER } from '@switchyard/protocol';
import { proxyStreamToTunnel } from '../src/index.ts';
import type { TunnelDialer } from '../src/index.ts';
import { within } from '@switchyard/clock/testing';
import { closesWithin, startRuntime, startScheduler, type Scheduler } from './helpers.ts';

interface Answer {
  readonly status: number;
  readonly headers: http2.IncomingHttpHeaders;
  readonly body: string;
  readonly trailers?: http2.IncomingHttpHeaders;
  readonly rstCode: number;
}

describe('proxyStreamToTunnel', () => {
  let scheduler: Scheduler;
  let dialer: TunnelDialer;
  let front: http2.Http2Server;
  let session: http2.ClientHttp2Session;
  const closedOnRuntime: string[] = [];
  /** Emits 'silent' as the runtime takes a `/silent` request. */
  const runtimeSide = new EventEmitter();
  /** `/echo` requests the runtime has begun to read. */
  const echoes = { opened: 0 };

  /** The runtime's handler: compat request and response, as the runtime serves MCP. */
  const handler = (req: http2.Http2ServerRequest, res: http2.Http2ServerResponse): void => {
    if (req.url === '/echo') {
      echoes.opened++;
      req.once('close', () => closedOnRuntime.push('/echo'));
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      return void req.once('end', () => res.end(`${req.headers['x-extra']} ${Buffer.concat(chunks).length}`));
    }
    if (req.url === '/trailers') {
      res.addTrailers({ 'x-checksum': 'abc' });
      return void res.end('body');
    }
    // Never answered: the request waits until its stream or the tunnel goes.
    if (req.url === '/silent') return void runtimeSide.emit('silent');
    if (req.url === '/reset-before') return void res.stream.close(http2.constants.NGHTTP2_INTERNAL_ERROR);
    if (req.url === '/hold') {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write('event: ready\n\n');
      return void res.once('close', () => closedOnRuntime.push('/hold'));
    }
    // A runtime posing as a scheduler that forwarded the request: the proxy drops that header.
    res.writeHead(200, { 'content-type': 'text/plain', 'x-upstream': 'yes', [FORWARDED_HEADER]: '1' });
    res.end(`got ${req.method} ${req.url}`);
  };

  before(async () => {
    scheduler = await startScheduler();
    ({ dialer } = await startRuntime(scheduler, 'rt-s', handler));
    front = http2.createServer();
    front.on('stream', (stream, headers) => {
      const [, runtimeId, ...rest] = String(headers[':path']).split('/');
      proxyStreamToTunnel(scheduler.endpoint.get(runtimeId!), stream, headers, `/${rest.join('/')}`, {
        runtimeId: runtimeId!,
        extraHeaders: { 'x-extra': 'added' },
      });
    });
    front.listen(0, '127.0.0.1');
    await once(front, 'listening');
    session = http2.connect(`http://127.0.0.1:${(front.address() as AddressInfo).port}`);
  });
  after(async () => {
    session.destroy();
    front.close();
    void dialer.close();
    await scheduler.close();
  });

  function ask(headers: http2.OutgoingHttpHeaders, body?: Buffer): Promise<Answer> {
    const stream = session.request(headers, { endStream: body === undefined });
    stream.on('error', () => {});
    if (body !== undefined) stream.end(body);
    let text = '';
    let trailers: http2.IncomingHttpHeaders | undefined;
    let response: http2.IncomingHttpHeaders = {};
    stream.on('data', (c: Buffer) => (text += c.toString()));
    stream.once('trailers', (t: http2.IncomingHttpHeaders) => (trailers = t));
    stream.once('response', (h: http2.IncomingHttpHeaders) => (response = h));
    return new Promise((resolve) =>
      stream.once('close', () =>
        resolve({
          status: Number(response[':status']),
          headers: response,
          body: text,
          ...(trailers ? { trailers } : {}),
          rstCode: stream.rstCode ?? 0,
        }),
      ),
    );
  }

  it("relays an answer with its status, headers and body, but not a scheduler's header", async () => {
    const answer = await ask({ ':path': '/rt-s/plain' });
    assert.equal(answer.status, 200);
    assert.equal(answer.headers['x-upstream'], 'yes');
    assert.equal(answer.headers[FORWARDED_HEADER], undefined);
    assert.equal(answer.body, 'got GET /plain');
  });

  it('streams a request body (four stream windows) to the runtime, with the extra headers', async () => {
    const bytes = 8 * 1024 * 1024;
    const answer = await ask({ ':path': '/rt-s/echo', ':method': 'POST' }, Buffer.alloc(bytes, 1));
    assert.equal(answer.body, `added ${bytes}`);
  });

  it('passes trailers to a client that accepts them', async () => {
    const answer = await ask({ ':path': '/rt-s/trailers', te: 'trailers' });
    assert.equal(answer.body, 'body');
    assert.equal(answer.trailers?.['x-checksum'], 'abc');
  });

  it('answers 502 naming a runtime that is not connected', async () => {
    const answer = await ask({ ':path': '/rt-none/x' });
    assert.equal(answer.status, 502);
    assert.deepEqual(JSON.parse(answer.body), { error: 'runtime not connected', runtime: 'rt-none' });
  });

  it('answers 502 "runtime stream failed" when the connected runtime resets the stream before answering', async () => {
    const answer = await ask({ ':path': '/rt-s/reset-before' });
    assert.equal(answer.status, 502);
    assert.deepEqual(JSON.parse(answer.body), { error: 'runtime stream failed', runtime: 'rt-s' });
  });

  it('answers 502 "runtime not connected" when the tunnel dies before the answer', async () => {
    const arrived = once(runtimeSide, 'silent');
    const answer = ask({ ':path': '/rt-s/silent' });
    const tunnel = scheduler.endpoint.get('rt-s')!;
    // Once the runtime has the request, not before: otherwise nothing was ever in flight.
    await within(arrived, 5000, 'the runtime had no /silent request');
    tunnel.session.destroy(new Error('tunnel lost'));
    const got = await answer;
    assert.equal(got.status, 502);
    assert.deepEqual(JSON.parse(got.body), { error: 'runtime not connected', runtime: 'rt-s' });
    ({ dialer } = await startRuntime(scheduler, 'rt-s', handler));
  });

  it('resets the client stream when the tunnel dies mid-answer', async () => {
    const stream = session.request({ ':path': '/rt-s/hold' });
    stream.on('error', () => {});
    // Not once(): it rejects on the 'error' that comes with the reset.
    const closed = new Promise((resolve) => stream.once('close', resolve));
    const [chunk] = (await once(stream, 'data')) as [Buffer];
    assert.equal(chunk.toString(), 'event: ready\n\n');
    // As the tunnel tears a dead peer down. (A runtime resetting its own
    // stream is no test of this: Node ends the stream before the reset.)
    scheduler.endpoint.get('rt-s')!.session.destroy(new Error('tunnel lost'));
    await closed;
    assert.equal(stream.rstCode, http2.constants.NGHTTP2_INTERNAL_ERROR);
    ({ dialer } = await startRuntime(scheduler, 'rt-s', handler));
  });

  it('cancels the runtime side when the client resets its stream', async () => {
    const stream = session.request({ ':path': '/rt-s/hold' });
    stream.on('error', () => {});
    await once(stream, 'data');
    stream.close(http2.constants.NGHTTP2_CANCEL);
    const deadline = performance.now() + 2000;
    while (closedOnRuntime.length < 2 && performance.now() < deadline) await new Promise((r) => setTimeout(r, 10));
    assert.ok(closedOnRuntime.includes('/hold'), 'the runtime saw its request close');
  });

  it('resets a request whose body does not arrive whole within requestTimeoutMs, on both sides', async () => {
    const REQUEST_TIMEOUT_MS = 300;
    const slow = http2.createServer();
    slow.on('stream', (stream, headers) => {
      proxyStreamToTunnel(scheduler.endpoint.get('rt-s'), stream, headers, '/echo', {
        runtimeId: 'rt-s',
        requestTimeoutMs: REQUEST_TIMEOUT_MS,
      });
    });
    slow.listen(0, '127.0.0.1');
    await once(slow, 'listening');
    const client = http2.connect(`http://127.0.0.1:${(slow.address() as AddressInfo).port}`);
    client.on('error', () => {});
    try {
      const tunnel = scheduler.endpoint.get('rt-s')!;
      closedOnRuntime.length = 0;
      const opened = echoes.opened;
      // A body begun and never ended: a byte, then nothing.
      const stream = client.request({ ':method': 'POST', ':path': '/echo' }, { endStream: false });
      stream.on('error', () => {});
      stream.write('{');
      const started = performance.now();
      for (let i = 0; echoes.opened === opened && i < 200; i++) await new Promise((r) => setTimeout(r, 5));
      const held = tunnel.streams;
      await closesWithin(stream, 20 * REQUEST_TIMEOUT_MS);
      const tookMs = performance.now() - started;
      assert.ok(tookMs >= REQUEST_TIMEOUT_MS - 50, `reset after ${tookMs} ms, before the deadline`);
      assert.notEqual(stream.rstCode, http2.constants.NGHTTP2_NO_ERROR);
      const deadline = performance.now() + 2000;
      while ((!closedOnRuntime.includes('/echo') || tunnel.streams >= held) && performance.now() < deadline) {
        await new Promise((r) => setTimeout(r, 10));
      }
      assert.ok(closedOnRuntime.includes('/echo'), 'the runtime saw its request close');
      assert.ok(tunnel.streams < held, 'its tunnel stream was given back');
      // A body that arrives in time is answered as ever.
      const quick = client.request({ ':method': 'POST', ':path': '/echo' }, { endStream: false });
      let text = '';
      quick.on('data', (c: Buffer) => (text += c.toString()));
      quick.end('{}');
      await once(quick, 'end');
      assert.equal(text, 'undefined 2');
    } finally {
      client.destroy();
      await new Promise((resolve) => slow.close(resolve));
    }
  });
});
