import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { connectV2, post, startHarness, textOf } from './harness.ts';
import type { Harness } from './harness.ts';

describe('stateless 2026-07-28 requests through the gateway', () => {
  let h: Harness;
  before(async () => {
    h = await startHarness(3);
  });
  after(() => h.close());

  it('routes every request by X-Switchyard-Process: one sandbox, one runtime', async () => {
    const client = await connectV2(h.url, 'modern', { 'X-Switchyard-Process': 'sandbox-a' });
    try {
      const counts: string[] = [];
      const runtimes = new Set<string>();
      for (let i = 0; i < 4; i++) {
        counts.push(textOf(await client.callTool({ name: 'counter', arguments: {} })));
        const who = JSON.parse(textOf(await client.callTool({ name: 'whoami', arguments: {} })));
        assert.equal(who.sandbox, 'sandbox-a');
        runtimes.add(who.runtime);
      }
      assert.deepEqual(counts, ['1', '2', '3', '4']);
      assert.equal(runtimes.size, 1);
    } finally {
      await client.close();
    }
  });

  it('spreads requests without a process identity over the runtimes', async () => {
    const client = await connectV2(h.url, 'modern');
    try {
      const runtimes = new Set<string>();
      for (let i = 0; i < 24; i++) {
        runtimes.add(JSON.parse(textOf(await client.callTool({ name: 'whoami', arguments: {} }))).runtime);
      }
      assert.ok(runtimes.size >= 2, `requests spread, saw ${[...runtimes].join(',')}`);
    } finally {
      await client.close();
    }
  });

  it('aborts the upstream call as soon as the client disconnects', async () => {
    const client = await connectV2(h.url, 'modern', { 'X-Switchyard-Process': 'sleeper' });
    try {
      const controller = new AbortController();
      const call = client.callTool({ name: 'sleep', arguments: { ms: 20_000 } }, { signal: controller.signal });
      call.catch(() => {});
      const runtime = async () => {
        for (;;) {
          const busy = h.runtimes.find((r) => r.running.count > 0);
          if (busy) return busy;
          await new Promise((r) => setTimeout(r, 5));
        }
      };
      const busy = await runtime();
      const cancelledBefore = busy.cancelled.count;
      controller.abort();
      await assert.rejects(call, /abort/i);
      for (let i = 0; i < 400 && busy.running.count > 0; i++) await new Promise((r) => setTimeout(r, 5));
      assert.equal(busy.running.count, 0, 'the runtime stopped the tool');
      assert.equal(busy.cancelled.count, cancelledBefore + 1, 'the tool saw its cancellation signal');
    } finally {
      await client.close();
    }
  });

  it('answers 405 to GET and DELETE without a session, saying what they need', async () => {
    for (const method of ['GET', 'DELETE']) {
      const res = await fetch(h.url, { method, headers: { 'mcp-protocol-version': '2026-07-28' } });
      assert.equal(res.status, 405, method);
      assert.equal(res.headers.get('allow'), 'POST');
      const { error } = (await res.json()) as { error: { code: number; message: string } };
      assert.equal(error.code, -32000);
      assert.equal(
        error.message,
        `${method} /mcp needs the Mcp-Session-Id of a session that initialize opened; without one, only POST is served`,
      );
    }
  });
});

describe('a runtime that goes away', () => {
  let h: Harness;
  before(async () => {
    h = await startHarness(2);
  });
  after(() => h.close());

  it('answers 404 for its sessions, evicts the route, and a re-initialize lands elsewhere', async () => {
    const client = await connectV2(h.url);
    const who = JSON.parse(textOf(await client.callTool({ name: 'whoami', arguments: {} })));
    const lost = h.runtimes.find((r) => r.id === who.runtime)!;
    const transport = client.transport as unknown as { sessionId: string };
    const sessionId = transport.sessionId;
    await client.close();
    await lost.close();
    h.scheduler.runtimes = h.scheduler.runtimes.filter((r) => r.id !== lost.id);

    const res = await post(
      h.url,
      { jsonrpc: '2.0', id: 7, method: 'tools/list' },
      { 'mcp-session-id': sessionId, 'mcp-protocol-version': '2025-11-25' },
    );
    assert.equal(res.status, 404);
    const body = res.json as { id: number; error: { code: number } };
    assert.deepEqual([body.id, body.error.code], [7, -32001]);

    const again = await connectV2(h.url);
    try {
      const after = JSON.parse(textOf(await again.callTool({ name: 'whoami', arguments: {} })));
      assert.notEqual(after.runtime, lost.id);
    } finally {
      await again.close();
    }
  });

  it('reschedules an initialize away from a runtime that refuses connections, excluding it', async () => {
    const live = h.scheduler.runtimes;
    h.scheduler.runtimes = [{ id: 'rt-dead', address: 'http://127.0.0.1:1' }, ...live];
    h.scheduler.preferred = 'rt-dead';
    const calls = h.scheduler.calls.length;
    try {
      const client = await connectV2(h.url);
      try {
        assert.equal(textOf(await client.callTool({ name: 'echo', arguments: { text: 'rescued' } })), 'rescued');
      } finally {
        await client.close();
      }
      const excludes = h.scheduler.calls.slice(calls).map((c) => c.exclude ?? []);
      assert.deepEqual(excludes.slice(0, 2), [[], ['rt-dead']]);
    } finally {
      h.scheduler.runtimes = live;
      h.scheduler.preferred = undefined;
    }
  });
});
