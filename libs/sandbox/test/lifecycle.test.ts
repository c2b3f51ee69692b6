import assert from 'node:assert/strict';
import type { Client } from '@modelcontextprotocol/client';
import { after, before, describe, it } from 'node:test';
import { ManualClock } from '@switchyard/clock/testing';
import type { MeteringEvent, SandboxHost } from '@switchyard/sandbox';
import { childPids } from './fixtures/children.ts';
import { connect } from './fixtures/clients.ts';
import { RecordingReporter, captureLogger, serveHttp1, type Served, testHost } from './fixtures/harness.ts';

const tinyServer = new URL('./fixtures/tiny-stdio-server.ts', import.meta.url).pathname;
// The same server as a shell script: 200 Node start-ups would be most of this file's time.
const tinyShellServer = new URL('./fixtures/tiny-stdio-server.sh', import.meta.url).pathname;

async function waitFor(what: string, check: () => boolean, timeoutMs = 20_000): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  while (!check()) {
    if (performance.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

describe('sandbox lifecycle on a manual clock', () => {
  let host: SandboxHost;
  let served: Served;
  let reporter: RecordingReporter;
  const clock = new ManualClock();
  const metered: MeteringEvent[] = [];

  before(async () => {
    reporter = new RecordingReporter();
    host = testHost({
      runtimeId: 'rt-life',
      classes: {
        demo: { engine: 'builtin', expireSeconds: 0.2 },
        tiny: { engine: 'stdio', command: process.execPath, args: [tinyServer], expireSeconds: 0.2 },
        'tiny-sh': { engine: 'stdio', command: '/bin/sh', args: [tinyShellServer], expireSeconds: 0.2 },
      },
      sandboxesMax: 25,
      sessionIdleMs: 1_000,
      reporter,
      meter: { record: (e) => void metered.push(e) },
      clock,
    });
    served = await serveHttp1(host);
  });
  after(async () => {
    await served.close();
    await host.close();
  });

  it('destroys a sandbox expireSeconds after its last session leaves and reports it removed', async () => {
    const c = await connect('v2-legacy', served.url, served.fetch, {
      'x-switchyard-class': 'demo',
      'x-switchyard-process': 'reap-me',
    });
    assert.equal(await c.callText('counter'), '1');
    await c.close();
    assert.ok(reporter.processes.has('reap-me'), 'still alive right after the session left');
    await clock.advance(199);
    assert.ok(reporter.processes.has('reap-me'), 'alive until expireSeconds has passed');
    await clock.advance(1);
    assert.ok(!reporter.processes.has('reap-me'), 'removed after expireSeconds');
    assert.deepEqual(
      metered.filter((e) => e.process === 'reap-me').map((e) => `${e.event}:${e.reason}`),
      ['start:created', 'recycle:expired'],
    );
  });

  it("meters a sandbox's lifetime as time passed, whatever is done to the wall clock meanwhile", async () => {
    const c = await connect('v2-legacy', served.url, served.fetch, {
      'x-switchyard-class': 'demo',
      'x-switchyard-process': 'metered-across-a-step',
    });
    assert.equal(await c.callText('counter'), '1');
    clock.stepWall(3_600_000); // NTP, or an operator, sets the clock forward an hour
    try {
      await c.close();
      await clock.advance(200);
      const recycle = metered.find((e) => e.process === 'metered-across-a-step' && e.event === 'recycle');
      assert.equal(recycle?.durationMs, 200, 'bound, then destroyed expireSeconds after its session left');
    } finally {
      clock.stepWall(-3_600_000);
    }
  });

  // A session or stateless request that names no process gets a sandbox of its own, destroyed as it ends:
  // no expiry (expireSeconds) passed, and billing or audit must tell that from one.
  for (const flavour of ['v2-legacy', 'v2-modern'] as const) {
    it(`meters the sandbox of a ${flavour} client that names no process as ended with it, not expired`, async () => {
      const before = new Set(metered.map((e) => e.process));
      const c = await connect(flavour, served.url, served.fetch, { 'x-switchyard-class': 'demo' });
      assert.equal(await c.callText('echo', { text: 'hi' }), 'hi');
      await c.close();
      await waitFor('its recycle', () => metered.some((e) => e.event === 'recycle' && !before.has(e.process)));
      const own = metered.filter((e) => !before.has(e.process));
      assert.ok(own.length >= 2, JSON.stringify(own));
      assert.ok(
        own.every((e) => e.reason === (e.event === 'start' ? 'created' : 'ended')),
        JSON.stringify(own),
      );
    });
  }

  it('closes an idle legacy session, which then answers 404', async () => {
    const c = await connect('v2-legacy', served.url, served.fetch, { 'x-switchyard-class': 'demo' });
    const sid = c.sessionId!;
    assert.equal(host.stats().sessions, 1);
    await clock.advance(1_000);
    assert.equal(host.stats().sessions, 0);
    const res = await fetch(`${served.url}/mcp`, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
        'mcp-session-id': sid,
      },
      body: JSON.stringify({ jsonrpc: '2.0', id: 3, method: 'ping' }),
    });
    assert.equal(res.status, 404);
    assert.ok(![...reporter.threads].some((t) => t.endsWith(`/${sid}`)), 'thread reported removed');
    await c.close().catch(() => undefined);
  });

  it('refuses a process id of another class with a 400 that names both classes and what to do', async () => {
    const c = await connect('v2-legacy', served.url, served.fetch, {
      'x-switchyard-class': 'demo',
      'x-switchyard-process': 'taken-by-demo',
    });
    try {
      const res = await fetch(`${served.url}/mcp`, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          accept: 'application/json, text/event-stream',
          'x-switchyard-class': 'tiny-sh',
          'x-switchyard-process': 'taken-by-demo',
        },
        body: JSON.stringify({
          jsonrpc: '2.0',
          id: 1,
          method: 'initialize',
          params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 't', version: '1' } },
        }),
      });
      assert.equal(res.status, 400);
      const { error } = (await res.json()) as { error: { message: string } };
      assert.equal(
        error.message,
        'sandbox "taken-by-demo" is of class "demo", not "tiny-sh": name another process for class "tiny-sh"',
      );
    } finally {
      await c.close();
      await clock.advance(200); // expireSeconds: the sandbox is gone before the next test counts sandboxes
    }
    assert.ok(!reporter.processes.has('taken-by-demo'));
  });

  it('answers REST parity calls: create, describe, toolcall, weight, delete', async () => {
    const created = await fetch(`${served.url}/sandboxes/rest-1`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ class: 'tiny' }),
    });
    assert.equal(created.status, 201);
    const call = await fetch(`${served.url}/sandboxes/rest-1/toolcall`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'echo', arguments: { text: 'via rest' } }),
    });
    assert.deepEqual(await call.json(), { content: [{ type: 'text', text: 'via rest' }] });
    assert.deepEqual(await (await fetch(`${served.url}/sandboxes/rest-1`)).json(), {
      id: 'rest-1',
      class: 'tiny',
      refs: 0,
      dead: false,
    });
    assert.deepEqual(await (await fetch(`${served.url}/weight`)).json(), { sandboxes: 24 });
    assert.equal((await fetch(`${served.url}/sandboxes/rest-1`, { method: 'DELETE' })).status, 204);
    assert.equal((await fetch(`${served.url}/sandboxes/rest-1`)).status, 404);
  });

  it('200 create/expire cycles of stdio sandboxes leave no child process behind', async () => {
    const batch = 20;
    for (let round = 0; round < 200 / batch; round++) {
      const ids = Array.from({ length: batch }, (_, i) => `cycle-${round}-${i}`);
      const answers = await Promise.all(
        ids.map((id) =>
          fetch(`${served.url}/sandboxes/${id}`, {
            method: 'POST',
            headers: { 'content-type': 'application/json' },
            body: '{"class":"tiny-sh"}',
          }),
        ),
      );
      assert.deepEqual(
        answers.map((a) => a.status),
        ids.map(() => 201),
      );
      await clock.advance(200);
      // Reaped once its servers have exited: until then they hold their places under sandboxesMax.
      await waitFor('the round to be reaped', () => host.stats().sandboxes === 0 && reporter.weight.sandboxes === 25);
    }
    await waitFor('every child to exit', () => childPids().length === 0);
    assert.equal(reporter.processes.size, 0);
    assert.equal(metered.filter((e) => e.event === 'recycle' && e.process.startsWith('cycle-')).length, 200);
  });
});

describe('cancellation reaches the runtime', () => {
  let host: SandboxHost;
  let served: Served;
  const logger = captureLogger();

  before(async () => {
    host = testHost({
      runtimeId: 'rt-cancel',
      classes: { default: { engine: 'builtin' } },
      logger,
    });
    served = await serveHttp1(host);
  });
  after(async () => {
    await served.close();
    await host.close();
  });

  for (const [n, flavour] of [
    [1, 'v2-modern'],
    [2, 'v2-legacy'],
  ] as const) {
    it(`${flavour}: aborting a sleep after its first progress cancels it in the sandbox`, async () => {
      const c = await connect(flavour, served.url, served.fetch);
      const abort = new AbortController();
      const progress: number[] = [];
      const raw = c.raw as Client;
      const call = raw.callTool(
        { name: 'sleep', arguments: { ms: 20_000 } },
        {
          signal: abort.signal,
          onprogress: (p) => {
            progress.push(p.progress);
            abort.abort();
          },
        },
      );
      await assert.rejects(call, /abort/i);
      await waitFor('the cancellation to be counted', () => host.stats().cancelled === n);
      assert.equal(progress[0], 100);
      assert.ok(logger.lines.some((l) => l.obj.event === 'tool.cancelled' && l.obj.tool === 'sleep'));
      await c.close();
    });
  }

  it('a sleep that completes reports progress every 100 ms and is not counted as cancelled', async () => {
    const c = await connect('v2-modern', served.url, served.fetch);
    const progress: number[] = [];
    const raw = c.raw as Client;
    const result = await raw.callTool(
      { name: 'sleep', arguments: { ms: 300 } },
      { onprogress: (p) => void progress.push(p.progress) },
    );
    assert.deepEqual(result.content, [{ type: 'text', text: 'slept 300' }]);
    assert.deepEqual(progress, [100, 200, 300]);
    assert.equal(host.stats().cancelled, 2);
    await c.close();
  });
});

describe('many cancelled calls', () => {
  const CALLS = 5;
  let host: SandboxHost;
  let served: Served;
  const logger = captureLogger();

  before(async () => {
    host = testHost({ runtimeId: 'rt-cancel-many', classes: { default: { engine: 'builtin' } }, logger });
    served = await serveHttp1(host);
  });
  after(async () => {
    await served.close();
    await host.close();
  });

  it(`are told at info once, and each at debug: a client cancels as often as it likes`, async () => {
    const c = await connect('v2-modern', served.url, served.fetch);
    try {
      for (let i = 0; i < CALLS; i++) {
        const abort = new AbortController();
        const call = (c.raw as Client).callTool(
          { name: 'sleep', arguments: { ms: 20_000 } },
          { signal: abort.signal, onprogress: () => abort.abort() },
        );
        await assert.rejects(call, /abort/i);
        await waitFor(`cancellation ${i + 1} to be counted`, () => host.stats().cancelled === i + 1);
      }
    } finally {
      await c.close();
    }
    const told = logger.lines.filter((l) => l.obj.event === 'tool.cancelled');
    assert.deepEqual(
      told.map((l) => l.level),
      ['info', ...Array<string>(CALLS - 1).fill('debug')],
    );
    assert.ok(told.every((l) => l.obj.tool === 'sleep' && typeof l.obj.sandbox === 'string'));
  });
});
