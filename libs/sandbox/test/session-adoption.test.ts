// Two `initialize` requests that overlap while their sandboxes start. An
// engine whose start waits for the test's word holds the first one between
// its session checks and the session's creation, so the overlap is certain,
// not a matter of timing.
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import type { McpServer } from '@modelcontextprotocol/server';
import type { Engine, SandboxInstance } from '@switchyard/sandbox';
import { emptyStats, serveHttp1, testHost } from './fixtures/harness.ts';

/** An engine whose sandboxes start when `open()` is called, counting starts and destroys. */
function gatedEngine() {
  let open!: () => void;
  const gate = new Promise<void>((resolve) => (open = resolve));
  const waiters: { count: number; resolve: () => void }[] = [];
  const counts = { created: 0, destroyed: 0 };
  const engine: Engine = {
    async create(): Promise<SandboxInstance> {
      counts.created++;
      // A waiter for more starts than there are stays: dropped, it would never resolve.
      for (const w of waiters.splice(0)) {
        if (counts.created >= w.count) w.resolve();
        else waiters.push(w);
      }
      await gate;
      let destroyed = false;
      return {
        capabilities: { tools: {} },
        dead: false,
        onDead() {},
        bind() {},
        register: (_server: McpServer) => () => {},
        async destroy() {
          if (!destroyed) counts.destroyed++;
          destroyed = true;
        },
      };
    },
  };
  /** Resolves once `count` sandboxes have begun to start. */
  const started = (count: number): Promise<void> =>
    counts.created >= count ? Promise.resolve() : new Promise((resolve) => waiters.push({ count, resolve }));
  return { engine, counts, started, open };
}

const INIT = JSON.stringify({
  jsonrpc: '2.0',
  id: 1,
  method: 'initialize',
  params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'overlap', version: '1' } },
});

/** A host serving class `gated` on a fresh gated engine. */
async function gatedHost(sessionsMax: number) {
  const gated = gatedEngine();
  const host = testHost({
    runtimeId: 'rt-overlap',
    classes: { gated: { engine: 'custom', name: 'gated', expireSeconds: 0 } },
    engines: { gated: gated.engine },
    sessionsMax,
  });
  const served = await serveHttp1(host);
  const initialize = async (headers: Record<string, string>) => {
    const res = await fetch(`${served.url}/mcp`, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
        'x-switchyard-class': 'gated',
        ...headers,
      },
      body: INIT,
    });
    return { status: res.status, session: res.headers.get('mcp-session-id'), text: await res.text() };
  };
  const remove = async (session: string) => {
    const res = await fetch(`${served.url}/mcp`, {
      method: 'DELETE',
      headers: { 'mcp-session-id': session, 'mcp-protocol-version': '2025-11-25' },
    });
    assert.equal(res.status, 200, await res.text());
  };
  const close = async () => {
    gated.open();
    await served.close();
    await host.close();
  };
  return { gated, host, initialize, remove, close };
}

describe('initialize requests that overlap while their sandbox starts', () => {
  const hosts: { close(): Promise<void> }[] = [];
  const start = async (sessionsMax: number) => {
    const h = await gatedHost(sessionsMax);
    hosts.push(h);
    return h;
  };
  after(async () => {
    await Promise.all(hosts.map((h) => h.close()));
  });

  it('adopting one session id: the second is refused, and the one session holds the only sandbox', async () => {
    const { gated, host, initialize, remove } = await start(10);
    const first = initialize({ 'x-switchyard-session-id': 'gw-dup', 'x-switchyard-process': 'dup-a' });
    await gated.started(1);
    // The second is answered at once or reaches its own sandbox's start; either way the first still waits.
    const second = initialize({ 'x-switchyard-session-id': 'gw-dup', 'x-switchyard-process': 'dup-b' });
    await Promise.race([second, gated.started(2)]);
    gated.open();
    const answers = await Promise.all([first, second]);

    assert.deepEqual(
      answers.map((a) => a.status),
      [200, 400],
      answers.map((a) => a.text).join('\n'),
    );
    assert.equal(answers[0]!.session, 'gw-dup');
    assert.match(answers[1]!.text, /session id already in use/);
    assert.equal(host.stats().sessions, 1);
    await remove('gw-dup');
    assert.deepEqual(host.stats(), emptyStats('gated'));
    assert.equal(gated.counts.destroyed, gated.counts.created, 'every sandbox started was destroyed');
  });

  it('the sessions being opened count toward sessionsMax', async () => {
    const { gated, host, initialize, remove } = await start(1);
    const first = initialize({ 'x-switchyard-process': 'max-a' });
    await gated.started(1);
    const second = initialize({ 'x-switchyard-process': 'max-b' });
    await Promise.race([second, gated.started(2)]);
    gated.open();
    const answers = await Promise.all([first, second]);

    assert.deepEqual(
      answers.map((a) => a.status),
      [200, 503],
      answers.map((a) => a.text).join('\n'),
    );
    assert.match(answers[1]!.text, /session limit reached/);
    assert.equal(host.stats().sessions, 1);
    await remove(answers[0]!.session!);
    assert.deepEqual(host.stats(), emptyStats('gated'));
    assert.equal(gated.counts.destroyed, gated.counts.created, 'every sandbox started was destroyed');
  });
});
