// Gateway.endEventStreams() on a gateway on its way out: the standing streams
// it relays end whole. The upstream here is a runtime stand-in on loopback
// that holds the head of a GET stream until the test lets it go, so a stream
// can be caught still being routed when the call comes.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { once } from 'node:events';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { createGateway } from '@switchyard/gateway';
import type { Gateway } from '@switchyard/gateway';
import { startSchedulerDouble } from './fixtures/scheduler-double.ts';
import type { SchedulerDouble } from './fixtures/scheduler-double.ts';
import { listen, stopServer } from './harness.ts';

/** How long a stream that should end may take: far more than a loopback round trip. */
const ENDS_WITHIN_MS = 5000;

/** Reads `body` to its end; `cut` when it broke, `open` when it was still open after `ms`. */
async function outcome(body: ReadableStream<Uint8Array>, ms: number): Promise<'ended' | 'cut' | 'open'> {
  const reader = body.getReader();
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<'open'>((resolve) => (timer = setTimeout(() => resolve('open'), ms)));
  const read = (async (): Promise<'ended' | 'cut'> => {
    try {
      for (;;) if ((await reader.read()).done) return 'ended';
    } catch {
      return 'cut';
    }
  })();
  try {
    return await Promise.race([read, late]);
  } finally {
    clearTimeout(timer);
    reader.cancel().catch(() => {});
  }
}

describe('Gateway.endEventStreams', () => {
  /** The GET streams the stand-in holds before their head, in arrival order; `arrive` hears of each. */
  const held: http.ServerResponse[] = [];
  let arrive: () => void = () => {};
  const runtime = http.createServer((req, res) => {
    if (req.method !== 'GET') return void res.writeHead(405).end();
    held.push(res);
    arrive();
  });
  let scheduler: SchedulerDouble;
  let gateway: Gateway;
  let server: http.Server;
  let url: string;

  before(async () => {
    runtime.listen(0, '127.0.0.1');
    await once(runtime, 'listening');
    const address = `http://127.0.0.1:${(runtime.address() as AddressInfo).port}`;
    scheduler = await startSchedulerDouble([{ id: 'rt-0', address }]);
    gateway = createGateway({ schedulers: [scheduler.url], upstreamMode: 'direct' });
    ({ server, url } = await listen(gateway));
  });
  after(async () => {
    await stopServer(server);
    await gateway.close();
    runtime.closeAllConnections();
    runtime.close();
    await scheduler.close();
  });

  it('ends a standing stream whose routing was still under way when it was called', async () => {
    const arrived = new Promise<void>((resolve) => (arrive = resolve));
    const stream = fetch(url, {
      headers: { accept: 'text/event-stream', 'mcp-session-id': 'session-1', 'mcp-protocol-version': '2025-06-18' },
    });
    await arrived;
    // The gateway stops accepting while this GET waits for its runtime's head.
    gateway.endEventStreams();
    const upstream = held.at(-1)!;
    const upstreamClosed = once(upstream, 'close');
    upstream.writeHead(200, { 'content-type': 'text/event-stream' });
    upstream.write(': open\n\n');
    const res = await stream;
    assert.equal(res.status, 200);
    assert.equal(await outcome(res.body!, ENDS_WITHIN_MS), 'ended', 'the stream ended whole');
    await upstreamClosed;
  });
});
