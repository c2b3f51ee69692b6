import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { once } from 'node:events';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { proxyToTunnel } from '../src/index.ts';
import type { TunnelDialer } from '../src/index.ts';
import { httpRequest, startRuntime, startScheduler } from './helpers.ts';
import type { Scheduler } from './helpers.ts';

describe('proxyToTunnel', () => {
  let scheduler: Scheduler;
  let dialer: TunnelDialer;
  let proxy: http.Server;
  let base: string;

  before(async () => {
    scheduler = await startScheduler();
    ({ dialer } = await startRuntime(scheduler, 'rt-p', (req, res) => {
      if (req.url === '/headers') {
        res.setHeader('content-type', 'application/json');
        res.setHeader('x-upstream', 'yes');
        return void res.end(JSON.stringify({ ...req.headers }));
      }
      if (req.url === '/count') {
        let bytes = 0;
        req.on('data', (c: Buffer) => (bytes += c.length));
        return void req.once('end', () => res.end(String(bytes)));
      }
      if (req.url === '/reset-before') return void res.stream.close(2);
      if (req.url === '/reset-after') {
        res.writeHead(200);
        res.write('partial');
        return void setImmediate(() => res.stream.close(2));
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
    dialer.close();
    proxy.closeAllConnections();
    proxy.close();
    await scheduler.close();
  });

  it('strips hop-by-hop headers, maps Host to :authority and adds extra headers', async () => {
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
  });

  it('streams a large request body to the runtime', async () => {
    const bytes = 8 * 1024 * 1024;
    const reply = await new Promise<string>((resolve, reject) => {
      const req = http.request(`${base}/rt-p/count`, { method: 'POST', agent: false }, (res) => {
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

  it('flushes the headers of a stream that sends no body yet (an idle SSE stream)', async () => {
    const res = await new Promise<http.IncomingMessage>((resolve, reject) => {
      http.get(`${base}/rt-p/silent`, { agent: false }, resolve).once('error', reject);
    });
    assert.equal(res.statusCode, 200);
    assert.equal(res.headers['content-type'], 'text/event-stream');
    res.destroy();
  });

  it('destroys the client response when the stream resets after headers', async () => {
    const res = await new Promise<http.IncomingMessage>((resolve, reject) => {
      http.get(`${base}/rt-p/reset-after`, { agent: false }, resolve).once('error', reject);
    });
    assert.equal(res.statusCode, 200);
    const outcome = await new Promise<string>((resolve) => {
      res.resume();
      res.once('end', () => resolve('end'));
      res.once('aborted', () => resolve('aborted'));
      res.once('error', () => resolve('error'));
    });
    assert.notEqual(outcome, 'end');
  });
});
