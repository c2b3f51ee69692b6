import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { Client } from '@modelcontextprotocol/client';
import { childPids } from './fixtures/children.ts';
import { connect } from './fixtures/clients.ts';
import { emptyStats, RecordingReporter, serveHttp1, testHost } from './fixtures/harness.ts';

const tinyServer = new URL('./fixtures/tiny-stdio-server.ts', import.meta.url).pathname;

describe('host close', () => {
  it('is idempotent, ends sessions, removes sandboxes, kills children and refuses new work', async () => {
    const reporter = new RecordingReporter();
    const host = testHost({
      runtimeId: 'rt-close',
      classes: { tiny: { engine: 'stdio', command: process.execPath, args: [tinyServer], warmPool: 1 } },
      sandboxesMax: 5,
      reporter,
    });
    const served = await serveHttp1(host);
    const c = await connect('v2-legacy', served.url, served.fetch, {
      'x-switchyard-class': 'tiny',
      'x-switchyard-process': 'closing',
    });
    assert.equal(await c.callText('echo', { text: 'x' }), 'x');
    assert.equal(host.stats().sessions, 1);
    assert.deepEqual(host.stats().sandboxesByClass, { tiny: 1 }, 'the warm pool left out');

    await Promise.all([host.close(), host.close()]);
    await host.close();
    assert.deepEqual(host.stats(), emptyStats('tiny'));
    assert.equal(reporter.processes.size, 0);
    assert.equal(reporter.threads.size, 0);
    assert.deepEqual(childPids(), []);
    const res = await fetch(`${served.url}/mcp`, { method: 'POST', body: '{}' });
    assert.equal(res.status, 503);
    await res.body?.cancel();
    await c.close().catch(() => undefined);
    await served.close();
  });

  it('lets the tool calls in flight finish within its grace, refusing new requests meanwhile, then closes', async () => {
    const host = testHost({ runtimeId: 'rt-grace', classes: { demo: { engine: 'builtin' } } });
    const served = await serveHttp1(host);
    const c = await connect('v2-legacy', served.url, served.fetch, { 'x-switchyard-class': 'demo' });
    const call = c.callText('sleep', { ms: 800 });
    await new Promise((resolve) => setTimeout(resolve, 200));
    const started = performance.now();
    const closed = host.close(10_000);
    const refused = await fetch(`${served.url}/mcp`, { method: 'POST', body: '{}' });
    assert.equal(refused.status, 503, 'new requests are refused while the host closes');
    await refused.body?.cancel();
    // The session is lost with the host: its client is told to re-initialize (elsewhere), not to retry here.
    const ofSession = await fetch(`${served.url}/mcp`, {
      method: 'POST',
      headers: { 'mcp-session-id': c.sessionId!, 'content-type': 'application/json' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 5, method: 'tools/list' }),
    });
    assert.equal(ofSession.status, 404);
    const body = (await ofSession.json()) as { error: { data: { reason: string } } };
    assert.equal(body.error.data.reason, 'session_not_found');
    assert.equal(await call, 'slept 800');
    await closed;
    const elapsedMs = performance.now() - started;
    assert.ok(elapsedMs < 2000, `closed ${elapsedMs} ms after close(), once the call ended`);
    assert.deepEqual(host.stats(), emptyStats('demo'));
    await c.close().catch(() => undefined);
    await served.close();
  });

  it('does not wait for a listen stream, which lasts as long as its client', async () => {
    const host = testHost({ runtimeId: 'rt-listen', classes: { demo: { engine: 'builtin' } } });
    const served = await serveHttp1(host);
    const c = await connect('v2-modern', served.url, served.fetch, {
      'x-switchyard-class': 'demo',
      'x-switchyard-process': 'listening',
    });
    const stream = await (c.raw as Client).listen({ toolsListChanged: true });
    const started = performance.now();
    await host.close(10_000);
    const elapsedMs = performance.now() - started;
    assert.ok(elapsedMs < 2000, `closed ${elapsedMs} ms after close() with a listen stream open`);
    await stream.close().catch(() => undefined);
    await c.close().catch(() => undefined);
    await served.close();
  });

  for (const flavour of ['v2-legacy', 'v2-modern'] as const) {
    it(`cuts what is still in flight at the end of its grace, cancelling the tool call (${flavour})`, async () => {
      const host = testHost({ runtimeId: 'rt-cut', classes: { demo: { engine: 'builtin' } } });
      const served = await serveHttp1(host);
      const c = await connect(flavour, served.url, served.fetch, { 'x-switchyard-class': 'demo' });
      // The client may try to resume the cut stream; only the host's side is judged here.
      const call = c.callText('sleep', { ms: 30_000 }).catch(() => 'cut');
      await new Promise((resolve) => setTimeout(resolve, 200));
      const started = performance.now();
      await host.close(300);
      const elapsedMs = performance.now() - started;
      assert.ok(elapsedMs >= 290 && elapsedMs < 2000, `closed after ${elapsedMs} ms`);
      for (let i = 0; host.stats().cancelled === 0 && i < 100; i++) await new Promise((r) => setTimeout(r, 20));
      assert.equal(host.stats().cancelled, 1, 'the cut call was cancelled');
      await c.close().catch(() => undefined);
      assert.equal(await call, 'cut');
      await served.close();
    });
  }
});
