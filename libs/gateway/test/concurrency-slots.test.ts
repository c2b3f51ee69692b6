// Concurrency slots on paths where the client leaves while routing is still
// busy and routing then ends without an error: each slot taken is given
// back exactly once, so other requests of the same principal stay counted.
import { createServer } from 'node:http';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createGateway } from '@switchyard/gateway';
import type { Gateway } from '@switchyard/gateway';
import { startSchedulerDouble } from './fixtures/scheduler-double.ts';
import type { SchedulerDouble } from './fixtures/scheduler-double.ts';
import { listen, stopServer } from './harness.ts';
import type { Server } from 'node:http';
import { until } from './until.ts';

describe('a GET whose client leaves while the runtime sends its 404 body', () => {
  let runtime: Server;
  let scheduler: SchedulerDouble;
  let gateway: Gateway;
  let server: Server;
  let url: string;
  let postArrived = false;
  let getArrived = false;
  let finish404: (() => void) | undefined;

  before(async () => {
    runtime = createServer((req, res) => {
      if (req.method === 'POST') {
        // A long tool call: answered only when the test ends.
        req.resume();
        postArrived = true;
        return;
      }
      // A session the runtime does not know: its 404 head now, its body later.
      getArrived = true;
      const body = JSON.stringify({ jsonrpc: '2.0', id: null, error: { code: -32001, message: 'Session not found' } });
      res.writeHead(404, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
      res.write(body.slice(0, 5));
      finish404 = () => res.end(body.slice(5));
    });
    await new Promise<void>((resolve) => runtime.listen(0, '127.0.0.1', resolve));
    const address = `http://127.0.0.1:${(runtime.address() as AddressInfo).port}`;
    scheduler = await startSchedulerDouble([{ id: 'rt-slots', address }]);
    gateway = createGateway({ schedulers: [scheduler.url], upstreamMode: 'direct', principalConcurrencyMax: 2 });
    ({ server, url } = await listen(gateway));
  });
  after(async () => {
    await stopServer(server);
    await gateway.close();
    runtime.closeAllConnections();
    await new Promise((resolve) => runtime.close(resolve));
    await scheduler.close();
  });

  it('gives its slot back once, leaving the principal’s other request counted', async () => {
    const target = new URL(url);
    const send = (method: string, session: string, body?: string): http.ClientRequest => {
      const req = http.request({
        host: target.hostname,
        port: target.port,
        path: target.pathname,
        method,
        agent: false,
        headers: {
          'mcp-session-id': session,
          accept: 'application/json, text/event-stream',
          ...(body ? { 'content-type': 'application/json' } : {}),
        },
      });
      req.on('error', () => {});
      req.end(body);
      return req;
    };
    const tool = send('POST', 'session-a', JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: {} }));
    await until(() => postArrived, 'the tool call at the runtime');
    assert.equal(gateway.stats().inFlight, 1);
    const stream = send('GET', 'session-b');
    await until(() => getArrived && finish404 !== undefined, 'the GET at the runtime');
    await until(() => gateway.stats().inFlight === 2, 'the GET counted');
    stream.destroy();
    await until(() => gateway.stats().inFlight === 1, 'the GET given back');
    finish404!();
    await new Promise((resolve) => setTimeout(resolve, 200));
    // The tool call is still being worked on: it must still count.
    assert.equal(gateway.stats().inFlight, 1);
    tool.destroy();
    await until(() => gateway.stats().inFlight === 0, 'the tool call given back');
  });
});
