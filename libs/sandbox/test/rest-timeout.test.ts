import assert from 'node:assert/strict';
import http from 'node:http';
import { after, before, describe, it } from 'node:test';
import type { SandboxHost, SandboxInstance } from '@switchyard/sandbox';
import { DeathFlag } from '../src/engine.ts';
import { serveHttp1, testHost, type Served } from './fixtures/harness.ts';

/** A sandbox whose tool `held` answers only when the test lets it (`release`), counting the calls begun. */
function heldTool() {
  const state = { begun: 0, release: () => {} };
  const death = new DeathFlag();
  const instance: SandboxInstance = {
    capabilities: { tools: {} },
    bind() {},
    register(server) {
      const tool = server.registerTool('held', { description: 'answers when released' }, async () => {
        state.begun++;
        await new Promise<void>((resolve) => (state.release = resolve));
        return { content: [{ type: 'text', text: 'released' }] };
      });
      return () => tool.remove();
    },
    get dead() {
      return death.dead;
    },
    onDead: (listener) => death.onDead(listener),
    destroy: async () => death.kill(),
  };
  return { state, engine: { create: async () => instance } };
}

/** A REST call over node:http (whose timers are not the global setTimeout the test mocks), answered or not yet. */
function post(url: string, body: unknown): () => { status: number; body: string } | undefined {
  let answer: { status: number; body: string } | undefined;
  const req = http.request(url, { method: 'POST', headers: { 'content-type': 'application/json' } }, (res) => {
    let text = '';
    res.on('data', (c: Buffer) => (text += c.toString()));
    res.on('end', () => (answer = { status: res.statusCode ?? 0, body: text }));
  });
  req.end(JSON.stringify(body));
  return () => answer;
}

/** Lets I/O and timers that are due run, up to a bounded number of event-loop turns, until `check` holds. */
async function settle(what: string, check: () => boolean): Promise<void> {
  for (let i = 0; i < 10_000 && !check(); i++) await new Promise((r) => setImmediate(r));
  assert.ok(check(), what);
}

describe('REST tool calls', () => {
  const held = heldTool();
  let host: SandboxHost;
  let served: Served;

  before(async () => {
    host = testHost({
      runtimeId: 'rt-rest',
      classes: { held: { engine: 'custom', name: 'held' } },
      engines: { held: held.engine },
    });
    served = await serveHttp1(host);
    const created = await fetch(`${served.url}/sandboxes/rest-long`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '{"class":"held"}',
    });
    assert.equal(created.status, 201);
  });
  after(async () => {
    await served.close();
    await host.close();
  });

  it('are allowed 10 min, as calls over MCP to a proxied server are, not the SDK default 60 s', async (t) => {
    t.mock.timers.enable({ apis: ['setTimeout'] });
    const call = (): (() => { status: number; body: string } | undefined) =>
      post(`${served.url}/sandboxes/rest-long/toolcall`, { name: 'held', arguments: {} });
    const long = call();
    await settle('the call to begin', () => held.state.begun === 1);
    t.mock.timers.tick(61_000);
    for (let i = 0; i < 100; i++) await new Promise((r) => setImmediate(r));
    assert.equal(long(), undefined, 'no answer after 61 s');
    held.state.release();
    await settle('the answer', () => long() !== undefined);
    assert.deepEqual(long(), { status: 200, body: JSON.stringify({ content: [{ type: 'text', text: 'released' }] }) });

    const endless = call();
    await settle('the second call to begin', () => held.state.begun === 2);
    t.mock.timers.tick(599_000);
    for (let i = 0; i < 100; i++) await new Promise((r) => setImmediate(r));
    assert.equal(endless(), undefined, 'no answer after 9 min 59 s');
    t.mock.timers.tick(1_000);
    await settle('the timeout', () => endless() !== undefined);
    assert.equal(endless()?.status, 504);
    assert.match(endless()!.body, /timed out/);
    held.state.release();
  });
});
