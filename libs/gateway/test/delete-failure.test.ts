// A DELETE of a legacy session that reached the runtime and then failed (the
// runtime cut the connection; behind a scheduler proxy, reset the stream): the
// client gets a 502 and takes the session for ended, and the runtime may have
// ended it, or half. The gateway evicts the session's route all the same, so
// its next request with that id is placed by the scheduler (which knows
// whether the runtime still holds the session) instead of being sent, from the
// cache, to a half-ended session. A stand-in plays the runtime, or the
// scheduler proxy in front of it (refusing relays as a release without them
// does, so every request takes /api/proxy), on real HTTP over loopback.
import { createServer } from 'node:http';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createGateway } from '@switchyard/gateway';
import type { Gateway } from '@switchyard/gateway';
import { startSchedulerDouble } from './fixtures/scheduler-double.ts';
import type { SchedulerDouble } from './fixtures/scheduler-double.ts';
import { INITIALIZE, listen, post, stopServer } from './harness.ts';
import type { Server } from 'node:http';

const LIST = { jsonrpc: '2.0', id: 2, method: 'tools/list' };

/** Answers as a runtime would, but fails every DELETE after reading it, as `mode` says. */
function standIn(mode: 'direct' | 'proxy', deletes: string[]): Server {
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    req.resume();
    req.on('end', () => {
      if (req.method === 'DELETE') {
        deletes.push(String(req.headers['mcp-session-id']));
        if (mode === 'direct') return void res.socket?.destroy();
        res.writeHead(502, { 'content-type': 'application/json' });
        return void res.end(JSON.stringify({ error: 'runtime stream failed', runtime: 'rt-a' }));
      }
      const session = req.headers['x-switchyard-session-id'] ?? req.headers['mcp-session-id'];
      res.writeHead(200, { 'content-type': 'application/json', ...(session ? { 'mcp-session-id': session } : {}) });
      res.end(JSON.stringify({ jsonrpc: '2.0', id: 1, result: {} }));
    });
  });
  server.on('upgrade', (_req, socket) =>
    socket.end('HTTP/1.1 404 Not Found\r\nConnection: close\r\nContent-Length: 0\r\n\r\n'),
  );
  return server;
}

for (const mode of ['direct', 'proxy'] as const) {
  describe(`a DELETE that fails after it was sent (${mode})`, () => {
    const deletes: string[] = [];
    const runtime = standIn(mode, deletes);
    let scheduler: SchedulerDouble;
    let gateway: Gateway;
    let server: Server;
    let url: string;
    before(async () => {
      await new Promise<void>((resolve) => runtime.listen(0, '127.0.0.1', resolve));
      const address = `http://127.0.0.1:${(runtime.address() as AddressInfo).port}`;
      scheduler = await startSchedulerDouble([{ id: 'rt-a', address }]);
      gateway = createGateway({ schedulers: [scheduler.url], upstreamMode: mode, upstreamCheckIntervalMs: 0 });
      ({ server, url } = await listen(gateway));
    });
    after(async () => {
      await stopServer(server);
      await gateway.close();
      runtime.closeAllConnections();
      await new Promise((resolve) => runtime.close(resolve));
      await scheduler.close();
    });

    it('answers 502 and evicts the route: the next request with that id is placed anew', async () => {
      const opened = await post(url, INITIALIZE);
      assert.equal(opened.status, 200, JSON.stringify(opened.json));
      const sessionId = opened.headers.get('mcp-session-id')!;
      const session = { 'mcp-session-id': sessionId, 'mcp-protocol-version': '2025-11-25' };
      const cached = gateway.stats().routeCacheEntries;

      const ended = await fetch(url, { method: 'DELETE', headers: session, signal: AbortSignal.timeout(10_000) });
      assert.equal(ended.status, 502, await ended.text());
      assert.deepEqual(deletes, [sessionId], 'the DELETE reached the runtime, once');
      assert.equal(gateway.stats().routeCacheEntries, cached - 1, 'the route is evicted');

      const scheduled = scheduler.calls.length;
      const next = await post(url, LIST, session);
      assert.equal(next.status, 200, JSON.stringify(next.json));
      assert.equal(scheduler.calls.length, scheduled + 1, 'placed by the scheduler, not from the cache');
    });
  });
}
