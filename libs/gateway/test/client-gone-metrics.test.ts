// A client that goes away while its answer is being relayed is counted as
// `upstream_errors_total{reason="aborted"}`, not as an upstream that broke
// (`stream`): over HTTP/1.1 (a runtime reached directly) and over the
// HTTP/2 event-stream connections to a scheduler replica.
import { once } from 'node:events';
import { createServer } from 'node:http';
import http from 'node:http';
import http2 from 'node:http2';
import type { AddressInfo } from 'node:net';
import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { Registry } from 'prom-client';
import { createGateway } from '@switchyard/gateway';
import type { Gateway, GatewayOptions } from '@switchyard/gateway';
import { startSchedulerDouble } from './fixtures/scheduler-double.ts';
import type { SchedulerDouble } from './fixtures/scheduler-double.ts';
import { listen, stopServer } from './harness.ts';
import { until } from './until.ts';

interface Rig {
  readonly url: string;
  readonly registry: Registry;
  readonly gateway: Gateway;
  close(): Promise<void>;
}

async function rig(upstream: http.Server | http2.Http2Server, options: Partial<GatewayOptions>): Promise<Rig> {
  upstream.listen(0, '127.0.0.1');
  await once(upstream, 'listening');
  const address = `http://127.0.0.1:${(upstream.address() as AddressInfo).port}`;
  const scheduler: SchedulerDouble = await startSchedulerDouble([{ id: 'rt-aborted', address }]);
  const registry = new Registry();
  const gateway = createGateway({
    schedulers: [scheduler.url],
    metrics: { registry, prefix: 'switchyard_gateway_' },
    ...options,
  });
  const { server, url } = await listen(gateway);
  return {
    url,
    registry,
    gateway,
    async close() {
      await stopServer(server);
      await gateway.close();
      if ('closeAllConnections' in upstream) upstream.closeAllConnections();
      upstream.close();
      await scheduler.close();
    },
  };
}

/** Sends `method` to `url` and resolves once the response head is in; the caller destroys the request. */
function open(
  url: string,
  method: string,
  headers: Record<string, string>,
  body?: string,
): Promise<http.ClientRequest> {
  const target = new URL(url);
  return new Promise((resolve, reject) => {
    const req = http.request(
      { host: target.hostname, port: target.port, path: target.pathname, method, agent: false, headers },
      (res) => {
        res.on('error', () => {});
        res.once('data', () => resolve(req));
      },
    );
    req.on('error', (error) => (req.destroyed ? undefined : reject(error)));
    req.end(body);
  });
}

async function errorsOf(registry: Registry): Promise<string> {
  return (await registry.getSingleMetricAsString('switchyard_gateway_upstream_errors_total')) ?? '';
}

/**
 * Once the relay's end is counted: counted as `aborted`, once, and never as a
 * broken `stream` (whose series is there from 0, as every reason's is).
 */
async function assertCountedAborted(r: Rig): Promise<void> {
  await until(() => r.gateway.stats().upstreamErrors > 0, 'the relay end counted');
  const errors = await errorsOf(r.registry);
  assert.match(errors, /upstream_errors_total\{reason="aborted"\} 1$/m, errors);
  assert.match(errors, /upstream_errors_total\{reason="stream"\} 0$/m, errors);
}

describe('a client that leaves while its answer is relayed', () => {
  const rigs: Rig[] = [];
  after(() => Promise.all(rigs.map((r) => r.close())));

  it('over HTTP/1.1 (direct mode) is counted as aborted, not as a broken upstream', async () => {
    let cut = false;
    const runtime = createServer((req, res) => {
      req.resume();
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': '100' });
      res.write('{"jsonrpc":');
      res.on('close', () => (cut = true));
    });
    const r = await rig(runtime, { upstreamMode: 'direct' });
    rigs.push(r);
    const body = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: {} });
    const req = await open(
      r.url,
      'POST',
      { 'content-type': 'application/json', accept: 'application/json', 'mcp-session-id': 's-h1' },
      body,
    );
    req.destroy();
    await until(() => cut, 'the upstream request cancelled');
    await assertCountedAborted(r);
  });

  it('over HTTP/2 (an event stream through a scheduler) is counted as aborted too', async () => {
    let cut = false;
    const replica = http2.createServer();
    replica.on('stream', (stream) => {
      stream.respond({ ':status': 200, 'content-type': 'text/event-stream' });
      stream.write('data: hello\n\n');
      stream.on('close', () => (cut = true));
    });
    const r = await rig(replica, { upstreamCheckIntervalMs: 0 });
    rigs.push(r);
    const req = await open(r.url, 'GET', { accept: 'text/event-stream', 'mcp-session-id': 's-h2' });
    req.destroy();
    await until(() => cut, 'the upstream stream cancelled');
    await assertCountedAborted(r);
  });
});
