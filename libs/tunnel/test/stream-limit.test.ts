// A tunnel that carries as many streams as the runtime takes at once, on
// loopback with a real dialer: Node's HTTP/2 client would queue the next
// stream until another ends, which an event stream may never do. Instead
// the next request is refused at once (503 with Retry-After and the proxy's
// error header, through /proxy and a relay alike) and taken again as soon
// as a stream ends. Traffic leaves a few streams to the scheduler's own
// requests (its /watch of the runtime).
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { once } from 'node:events';
import http2 from 'node:http2';
import { PROXY_ERRORS, PROXY_ERROR_HEADER, SwitchyardError } from '@switchyard/protocol';
import { H2_TUNING, type Tunnel, type TunnelDialer } from '../src/index.ts';
import { askRelay } from '../src/testing.ts';
import { httpRequest, readStream, startRuntime, startScheduler, type Scheduler } from './helpers.ts';

describe('a tunnel at its stream limit', { timeout: 20_000 }, () => {
  let scheduler: Scheduler;
  let dialer: TunnelDialer;
  let tunnel: Tunnel;
  const held: http2.ClientHttp2Stream[] = [];

  before(async () => {
    scheduler = await startScheduler();
    ({ dialer, tunnel } = await startRuntime(
      scheduler,
      'rt-full',
      (req, res) => {
        if (req.url === '/hold') return void res.writeHead(200, { 'content-type': 'text/event-stream' }).write(':\n\n');
        res.end(`ok ${req.url}`);
      },
      { relayHandler: (_req, res) => void res.end('relayed') },
    ));
    // Every stream traffic may take, each answered and left open.
    await Promise.all(
      Array.from({ length: H2_TUNING.maxConcurrentStreams - H2_TUNING.controlStreams }, async () => {
        const stream = tunnel.request({ ':path': '/hold' });
        stream.on('error', () => {});
        held.push(stream);
        await once(stream, 'response');
      }),
    );
  });
  after(async () => {
    for (const stream of held) stream.close(http2.constants.NGHTTP2_CANCEL);
    void dialer.close();
    await scheduler.close();
  });

  it('refuses the next stream at once with capacity_exhausted', () => {
    assert.throws(
      () => tunnel.request({ ':path': '/next' }),
      (error: unknown) => error instanceof SwitchyardError && error.code === 'capacity_exhausted',
    );
    assert.throws(() => tunnel.openConnection(), /as many as the runtime takes at once/);
    assert.equal(tunnel.usable, true, 'the tunnel itself is fine');
  });

  it('answers a proxied request 503 with Retry-After and the error header, not a wait', async () => {
    const answer = await httpRequest(`${scheduler.url}/proxy/rt-full/next`);
    assert.equal(answer.status, 503);
    assert.equal(answer.headers['retry-after'], '1');
    assert.equal(answer.headers[PROXY_ERROR_HEADER], PROXY_ERRORS.streamsFull);
    assert.deepEqual(JSON.parse(answer.body), { error: PROXY_ERRORS.streamsFull, runtime: 'rt-full' });
  });

  it('refuses a relay 503 the same way', async () => {
    const { status, text, socket } = await askRelay(scheduler.port, '/relay/rt-full');
    socket.destroy();
    assert.equal(status, 503);
    assert.match(text, /^retry-after: 1\r$/im);
    assert.match(text, new RegExp(`^${PROXY_ERROR_HEADER}: ${PROXY_ERRORS.streamsFull}\r$`, 'im'));
  });

  it("leaves the last streams to the scheduler's own requests, up to the runtime's limit", async () => {
    const own: Response[] = [];
    for (let i = 0; i < H2_TUNING.controlStreams; i++) {
      const res = await tunnel.fetch('http://runtime/hold');
      assert.equal(res.status, 200);
      own.push(res);
    }
    await assert.rejects(tunnel.fetch('http://runtime/next'), /as many as the runtime takes at once/);
    await Promise.all(own.map((res) => res.body!.cancel()));
  });

  it('takes a request again once a stream has ended', async () => {
    const ended = held.pop()!;
    ended.close(http2.constants.NGHTTP2_CANCEL);
    await once(ended, 'close');
    assert.deepEqual(await readStream(tunnel.request({ ':path': '/next' })), { status: 200, body: 'ok /next' });
  });

  it('takes new streams at once when every stream was taken and some just ended, again and again', async () => {
    // Every stream of the runtime's limit, its control streams included. A
    // stream ended here is counted by the runtime for a few ticks more, and
    // the next stream may come within them.
    const own: Response[] = [];
    while (tunnel.streams < H2_TUNING.maxConcurrentStreams) own.push(await tunnel.fetch('http://runtime/hold'));
    try {
      // Such a stream, still counted by the runtime, stands in for one more here, past the scheduler's count.
      const extra = tunnel.session.request({ ':path': '/past-the-limit' });
      extra.on('error', () => {});
      assert.deepEqual(await readStream(extra), { status: 200, body: 'ok /past-the-limit' });
      for (let round = 0; round < 50; round++) {
        const ended = own.splice(0, 8);
        await Promise.all(ended.map((res) => res.body!.cancel()));
        // Ended streams are gone here once their 'close' has come: then the tunnel takes as many more at once.
        while (tunnel.streams > H2_TUNING.maxConcurrentStreams - ended.length) await new Promise(setImmediate);
        const next = await Promise.all(ended.map(() => tunnel.fetch('http://runtime/hold')));
        own.push(...next);
        assert.deepEqual(
          next.map((res) => res.status),
          ended.map(() => 200),
          `round ${round}`,
        );
      }
    } finally {
      await Promise.all(own.map((res) => res.body!.cancel()));
    }
  });
});
