import tls from 'node:tls';
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { Client as ClientV1 } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport as TransportV1 } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { certificateFor127, startTlsFront, type TlsFront } from '@switchyard/service/testing';
import { startRuntime } from './fixtures/runtime.ts';
import { startSchedulerDouble } from './fixtures/scheduler-double.ts';
import { connectV2, post, startHarness, textOf } from './harness.ts';
import type { Harness } from './harness.ts';

describe('legacy sessions through the gateway', () => {
  let h: Harness;
  before(async () => {
    h = await startHarness(3);
  });
  after(() => h.close());

  it('keeps a v2 session on one runtime: the per-sandbox counter counts up', async () => {
    const client = await connectV2(h.url);
    try {
      const values: string[] = [];
      for (let i = 0; i < 3; i++) values.push(textOf(await client.callTool({ name: 'counter', arguments: {} })));
      assert.deepEqual(values, ['1', '2', '3']);
      const who = JSON.parse(textOf(await client.callTool({ name: 'whoami', arguments: {} })));
      assert.match(who.sandbox, /^[0-9a-f]{32}$/, 'the process defaults to the minted session id');
    } finally {
      await client.close();
    }
  });

  it('serves a v1 SDK client: echo round-trips', async () => {
    const client = new ClientV1({ name: 'v1', version: '1.0.0' });
    await client.connect(new TransportV1(new URL(h.url)));
    try {
      const result = await client.callTool({ name: 'echo', arguments: { text: 'hello v1' } });
      assert.equal(textOf(result), 'hello v1');
    } finally {
      await client.close();
    }
  });

  it('keeps 50 concurrent sessions apart and spreads them over the runtimes', async () => {
    const clients = await Promise.all(Array.from({ length: 50 }, () => connectV2(h.url)));
    try {
      const results = await Promise.all(
        clients.map(async (c, i) => {
          const echoed = textOf(await c.callTool({ name: 'echo', arguments: { text: `s${i}` } }));
          const first = textOf(await c.callTool({ name: 'counter', arguments: {} }));
          const second = textOf(await c.callTool({ name: 'counter', arguments: {} }));
          const who = JSON.parse(textOf(await c.callTool({ name: 'whoami', arguments: {} }))) as { runtime: string };
          return { echoed, first, second, runtime: who.runtime };
        }),
      );
      results.forEach((r, i) => assert.deepEqual([r.echoed, r.first, r.second], [`s${i}`, '1', '2']));
      assert.ok(new Set(results.map((r) => r.runtime)).size >= 2, 'sessions land on more than one runtime');
    } finally {
      await Promise.all(clients.map((c) => c.close()));
    }
  });

  it('delivers server notifications on the GET stream', async () => {
    const client = await connectV2(h.url);
    try {
      const received = new Promise<string>((resolve) => {
        client.setNotificationHandler('notifications/message', (n) => resolve(String(n.params.data)));
      });
      // The standalone GET stream opens after initialize; wait until the gateway relays one.
      for (let i = 0; i < 200 && h.gateway.stats().sseOpen === 0; i++) await new Promise((r) => setImmediate(r));
      assert.ok(h.gateway.stats().sseOpen >= 1, 'a GET stream is open through the gateway');
      await Promise.all(h.runtimes.map((r) => r.notifyAll('ping-from-runtime')));
      assert.equal(await received, 'ping-from-runtime');
    } finally {
      await client.close();
    }
  });

  it('ends the session on DELETE: the route is evicted', async () => {
    const client = await connectV2(h.url);
    const transport = client.transport as unknown as { terminateSession(): Promise<void>; sessionId?: string };
    const before = h.gateway.stats().routeCacheEntries;
    const sessionId = transport.sessionId!;
    await transport.terminateSession();
    assert.equal(h.gateway.stats().routeCacheEntries, before - 1);
    await client.close();
    // The session's next request: 404, saying it may have ended, not only that its runtime is gone.
    const res = await post(
      h.url,
      { jsonrpc: '2.0', id: 9, method: 'tools/list' },
      { 'mcp-session-id': sessionId, 'mcp-protocol-version': '2025-11-25' },
    );
    assert.equal(res.status, 404);
    const body = res.json as { id: unknown; error: { message: string } };
    assert.equal(body.id, 9);
    assert.match(body.error.message, /it ended, expired or lost its runtime; re-initialize/);
  });
});

/** Opens a session's GET stream twice in turn, each time receiving a notification on it. */
async function streamTwice(h: Harness): Promise<void> {
  for (const text of ['first', 'second']) {
    const client = await connectV2(h.url);
    try {
      const received = new Promise<string>((resolve) => {
        client.setNotificationHandler('notifications/message', (n) => resolve(String(n.params.data)));
      });
      for (let i = 0; i < 500 && h.gateway.stats().sseOpen === 0; i++) await new Promise((r) => setTimeout(r, 2));
      assert.equal(h.gateway.stats().sseOpen, 1, 'the GET stream is open through the gateway');
      await h.runtimes[0]!.notifyAll(text);
      assert.equal(await received, text);
    } finally {
      await client.close();
    }
    for (let i = 0; i < 500 && h.gateway.stats().sseOpen > 0; i++) await new Promise((r) => setTimeout(r, 2));
    assert.equal(h.gateway.stats().sseOpen, 0, 'the GET stream closed with its client');
  }
}

describe('event streams through a scheduler that speaks only HTTP/1.1', () => {
  // The runtime fixtures stand in for schedulers here: plain HTTP/1.1
  // servers answering any path, as a scheduler from before h2c would.
  let h: Harness;
  const warnings: string[] = [];
  before(async () => {
    const logger = {
      info() {},
      debug() {},
      error() {},
      warn: (_o: object, msg?: string) => void warnings.push(msg ?? ''),
    };
    h = await startHarness(1, { upstreamMode: 'proxy', logger });
  });
  after(() => h.close());

  it('opens them over HTTP/1.1 after the HTTP/2 preface is refused, and says so once', async () => {
    await streamTwice(h);
    assert.deepEqual(
      warnings.filter((w) => w.includes('HTTP/2')),
      ['scheduler does not speak HTTP/2 with prior knowledge; event streams use HTTP/1.1'],
    );
  });
});

describe('event streams through a TLS front that offers only HTTP/1.1', () => {
  // A scheduler reached on an https: URL, with TLS ended by a proxy that
  // does not offer h2 by ALPN. The front pipes the decrypted bytes to a
  // runtime fixture, which stands in for the scheduler behind it as above.
  const certificate = certificateFor127();
  const missing = 'missing' in certificate ? certificate.missing : false;
  const defaults = tls.getCACertificates('default');
  const warnings: string[] = [];
  let h: Harness;
  let front: TlsFront;
  before(async () => {
    if ('missing' in certificate) return;
    const runtime = await startRuntime('rt-0');
    front = await startTlsFront(certificate, Number(new URL(runtime.address).port));
    tls.setDefaultCACertificates([...defaults, certificate.cert]);
    const scheduler = await startSchedulerDouble([{ id: runtime.id, address: front.url }]);
    const logger = {
      info() {},
      debug() {},
      error() {},
      warn: (_o: object, msg?: string) => void warnings.push(msg ?? ''),
    };
    const inner = await startHarness(0, { upstreamMode: 'proxy', logger }, scheduler);
    h = {
      ...inner,
      runtimes: [runtime],
      async close() {
        await inner.close();
        await runtime.close();
        await scheduler.close();
        await front.close();
      },
    };
  });
  after(async () => {
    tls.setDefaultCACertificates(defaults);
    await h?.close();
  });

  it('opens them over HTTP/1.1 inside TLS, and says why once', { skip: missing }, async () => {
    await streamTwice(h);
    assert.deepEqual(
      warnings.filter((w) => w.includes('HTTP/2')),
      ['scheduler TLS endpoint does not offer HTTP/2 (ALPN h2); event streams use HTTP/1.1'],
    );
  });
});
