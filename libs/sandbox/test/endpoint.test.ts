import assert from 'node:assert/strict';
import http from 'node:http';
import { after, afterEach, before, describe, it } from 'node:test';
import type { SandboxHost } from '@switchyard/sandbox';
import { FLAVOURS, connect, type TestClient } from './fixtures/clients.ts';
import { RecordingReporter, serveHttp1, serveHttp2, type Served, testHost } from './fixtures/harness.ts';

const SERVERS = [
  { name: 'node http', serve: serveHttp1 },
  { name: 'http2 (h2c)', serve: serveHttp2 },
];

for (const { name: serverName, serve } of SERVERS) {
  describe(`builtin sandboxes over ${serverName}`, () => {
    let host: SandboxHost;
    let served: Served;
    let reporter: RecordingReporter;
    const open: TestClient[] = [];
    const client = async (flavour: (typeof FLAVOURS)[number], headers: Record<string, string> = {}) => {
      const c = await connect(flavour, served.url, served.fetch, headers);
      open.push(c);
      return c;
    };

    before(async () => {
      reporter = new RecordingReporter();
      host = testHost({
        runtimeId: 'rt-1',
        classes: { default: { engine: 'builtin' }, demo: { engine: 'builtin' } },
        sandboxesMax: 50,
        reporter,
      });
      served = await serve(host);
    });
    afterEach(async () => {
      await Promise.all(open.splice(0).map((c) => c.close()));
    });
    after(async () => {
      await served.close();
      await host.close();
    });

    for (const flavour of FLAVOURS) {
      it(`${flavour}: lists the demo tools, echoes and names itself`, async () => {
        const c = await client(flavour, { 'x-switchyard-class': 'demo', 'x-switchyard-process': `who-${flavour}` });
        assert.deepEqual(await c.listToolNames(), ['counter', 'echo', 'sleep', 'whoami']);
        assert.equal(await c.callText('echo', { text: 'hello' }), 'hello');
        assert.deepEqual(JSON.parse(await c.callText('whoami')), {
          runtime: 'rt-1',
          sandbox: `who-${flavour}`,
          class: 'demo',
        });
      });

      it(`${flavour}: two clients on one process share a counter, another process does not`, async () => {
        const a = await client(flavour, { 'x-switchyard-process': `shared-${flavour}` });
        const b = await client(flavour, { 'x-switchyard-process': `shared-${flavour}` });
        const other = await client(flavour, { 'x-switchyard-process': `other-${flavour}` });
        assert.equal(await a.callText('counter'), '1');
        assert.equal(await b.callText('counter'), '2');
        assert.equal(await a.callText('counter'), '3');
        assert.equal(await other.callText('counter'), '1');
      });
    }

    it('a legacy session adopts the gateway-minted session id and reports it as a thread', async () => {
      const c = await client('v2-legacy', {
        'x-switchyard-session-id': 'gw-minted-1',
        'x-switchyard-process': 'p-adopt',
      });
      assert.equal(c.sessionId, 'gw-minted-1');
      assert.equal(await c.callText('counter'), '1');
      assert.ok(reporter.threads.has('p-adopt/gw-minted-1'));
      assert.ok(reporter.processes.has('p-adopt'));
      await c.close();
      open.splice(open.indexOf(c), 1);
      assert.ok(!reporter.threads.has('p-adopt/gw-minted-1'), 'DELETE removes the thread');
    });

    it('a legacy session answers only the principal that opened it; another one is told it does not exist', async () => {
      const alice = await client('v2-legacy', { 'x-switchyard-principal': 'alice', 'x-switchyard-process': 'p-bound' });
      assert.equal(await alice.callText('counter'), '1');
      const call = (principal?: string) =>
        served.fetch(`${served.url}/mcp`, {
          method: 'POST',
          headers: {
            'content-type': 'application/json',
            accept: 'application/json, text/event-stream',
            'mcp-protocol-version': '2025-11-25',
            'mcp-session-id': alice.sessionId!,
            ...(principal ? { 'x-switchyard-principal': principal } : {}),
          },
          body: JSON.stringify({ jsonrpc: '2.0', id: 7, method: 'tools/call', params: { name: 'counter' } }),
        });
      for (const principal of ['bob', undefined]) {
        const res = await call(principal);
        const body = (await res.json()) as { error: { data: { reason: string } } };
        assert.equal(res.status, 404, `principal ${principal ?? '(none)'}`);
        assert.equal(body.error.data.reason, 'session_not_found');
      }
      assert.equal(await alice.callText('counter'), '2', 'the refused calls reached nothing');
    });

    it('stateless requests record the process but no thread', async () => {
      const before = reporter.events.filter((e) => e.startsWith('+t')).length;
      const c = await client('v2-modern', { 'x-switchyard-process': 'p-stateless' });
      assert.equal(await c.callText('echo', { text: 'x' }), 'x');
      assert.ok(reporter.processes.has('p-stateless'));
      assert.equal(reporter.events.filter((e) => e.startsWith('+t')).length, before);
    });

    it('a GET stream its client left is let go at once', async () => {
      const headers = { 'content-type': 'application/json', 'mcp-protocol-version': '2025-11-25' };
      const init = await served.fetch(`${served.url}/mcp`, {
        method: 'POST',
        headers: { ...headers, accept: 'application/json, text/event-stream', 'x-switchyard-class': 'demo' },
        body: JSON.stringify({
          jsonrpc: '2.0',
          id: 1,
          method: 'initialize',
          params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'raw', version: '1' } },
        }),
      });
      await init.text();
      const session = { ...headers, 'mcp-session-id': init.headers.get('mcp-session-id')! };
      const initialized = await served.fetch(`${served.url}/mcp`, {
        method: 'POST',
        headers: { ...session, accept: 'application/json, text/event-stream' },
        body: JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }),
      });
      assert.equal(initialized.status, 202);
      // A silent stream: nothing is written to it before the SDK's keep-alive (15 s), which would find the
      // client gone only then.
      const before = host.stats().eventStreams;
      for (const attempt of ['first', 'second', 'third']) {
        const left = new AbortController();
        const res = await served.fetch(`${served.url}/mcp`, {
          headers: { ...session, accept: 'text/event-stream' },
          signal: left.signal,
        });
        assert.equal(res.status, 200, `${attempt} GET: ${res.status === 200 ? '' : await res.text()}`);
        assert.equal(host.stats().eventStreams, before + 1, `${attempt} GET: its stream is counted`);
        left.abort();
        // The host hears of it over loopback at once (the SDK's keep-alive would be 15 s); 5 s is plenty loaded.
        for (let i = 0; i < 250 && host.stats().eventStreams !== before; i++)
          await new Promise((r) => setTimeout(r, 20));
        assert.equal(host.stats().eventStreams, before, `${attempt} GET: let go`);
      }
    });
  });
}

// A pooling client (the gateway, in direct mode) closes an idle connection
// before the server does only if it is told the server's timeout. The SDK
// sets `Connection: keep-alive` on event streams, and a Connection header set
// by the app stops Node from announcing `Keep-Alive: timeout`; the gateway
// then reused connections the runtime was closing and got resets.
describe('HTTP/1.1 answers of the host', () => {
  let host: SandboxHost;
  let served: Served;
  before(async () => {
    host = testHost({ runtimeId: 'rt-ka', classes: { demo: { engine: 'builtin' } } });
    served = await serveHttp1(host);
  });
  after(async () => {
    await served.close();
    await host.close();
  });

  it('leave the connection to Node, which announces its keep-alive timeout, on JSON and event-stream answers', async () => {
    const initialize = {
      jsonrpc: '2.0',
      id: 1,
      method: 'initialize',
      params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'ka', version: '1' } },
    };
    for (const accept of ['application/json, text/event-stream', 'text/event-stream, application/json']) {
      const res = await new Promise<http.IncomingMessage>((resolve, reject) => {
        const body = JSON.stringify(initialize);
        const req = http.request(`${served.url}/mcp`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', accept, 'x-switchyard-class': 'demo' },
        });
        req.once('response', resolve).once('error', reject);
        req.end(body);
      });
      res.resume();
      assert.equal(res.statusCode, 200);
      assert.match(String(res.headers['keep-alive']), /^timeout=\d+$/, JSON.stringify(res.headers));
    }
    const missing = await fetch(`${served.url}/mcp`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'tools/list' }),
    });
    await missing.text();
    assert.match(String(missing.headers.get('keep-alive')), /^timeout=\d+$/);
  });
});
