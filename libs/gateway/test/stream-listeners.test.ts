// What an open GET stream hangs on its client's response. A gateway holds
// 10,000 of them idle in the benchmark: a second 'close' listener there
// (the relay's own, a closure) turned the response's listeners into an array,
// about 200 bytes of each stream. The relay hears of the close from the
// gateway's listener instead; the client leaving must still cancel upstream.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { once } from 'node:events';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { createGateway } from '@switchyard/gateway';
import type { Gateway } from '@switchyard/gateway';
import { startSchedulerDouble } from './fixtures/scheduler-double.ts';
import type { SchedulerDouble } from './fixtures/scheduler-double.ts';
import { stopServer } from './harness.ts';

const SESSION_HEADERS = { accept: 'text/event-stream', 'mcp-protocol-version': '2025-06-18' };

describe('an open GET stream relayed by the gateway', () => {
  /** The upstream's side of each GET stream, in arrival order. */
  const upstreamRequests: http.IncomingMessage[] = [];
  const runtime = http.createServer((req, res) => {
    if (req.method !== 'GET') return void res.writeHead(405).end();
    upstreamRequests.push(req);
    // The gateway cancelling the stream resets it: what the test waits for, not a failure.
    req.on('error', () => {});
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    res.write(': open\n\n');
  });
  /** The gateway's responses to its clients, in arrival order. */
  const responses: http.ServerResponse[] = [];
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
    server = http.createServer((req, res) => {
      responses.push(res);
      gateway.app(req, res);
    });
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/mcp`;
  });
  after(async () => {
    await stopServer(server);
    await gateway.close();
    runtime.closeAllConnections();
    runtime.close();
    await scheduler.close();
  });

  it("has one 'close' listener on its response, and its client leaving still cancels it upstream", async () => {
    const client = new AbortController();
    const res = await fetch(url, {
      headers: { ...SESSION_HEADERS, 'mcp-session-id': 'session-1' },
      signal: client.signal,
    });
    assert.equal(res.status, 200);
    const reader = res.body!.getReader();
    // The first event has come through: the relay is streaming.
    assert.ok((await reader.read()).value);
    const response = responses.at(-1)!;
    assert.equal(response.listenerCount('close'), 1, "close listeners on an open stream's response");
    const upstream = upstreamRequests.at(-1)!;
    const upstreamClosed = new Promise<void>((resolve) => upstream.once('close', () => resolve()));
    client.abort();
    // Bounded: the gateway's close of the upstream request is what ends this wait.
    await upstreamClosed;
    assert.equal(gateway.stats().sseOpen, 0);
  });
});
