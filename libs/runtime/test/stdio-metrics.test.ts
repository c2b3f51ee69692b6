// What a runtime's stdio servers do wrong is counted on its /metrics, by
// class: messages refused because a server left too much unread on its
// stdin, servers stopped as stuck, and sandboxes that died on their own.
// Real servers (the sandbox lib's unruly fixture) behind a real node,
// scraped over its direct listener; the 60 s of a stall pass on a ManualClock.
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { ManualClock } from '@switchyard/clock/testing';
import { startRuntimeNode, type RuntimeNode } from '../src/index.ts';
import { LEGACY, nodeOptions, rpc, scrape } from './support.ts';

const unruly = new URL('../../sandbox/test/fixtures/unruly-stdio-server.ts', import.meta.url).pathname;
const unrulyClass = (mode: string) => ({
  engine: 'stdio' as const,
  command: process.execPath,
  args: [unruly, mode],
  expireSeconds: 0,
});
/** Calls of 1 MiB each: 24 are 24 MiB, past the 16 MiB that may wait on a server's stdin. */
const CALLS = 24;
const TEXT = 'x'.repeat(1024 * 1024);

async function waitFor(what: string, check: () => boolean | Promise<boolean>, timeoutMs = 10_000): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  while (!(await check())) {
    if (performance.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

async function initialize(url: string, cls: string): Promise<string> {
  const init = await rpc(url, cls, {
    jsonrpc: '2.0',
    id: 0,
    method: 'initialize',
    params: { protocolVersion: LEGACY, capabilities: {}, clientInfo: { name: 'stdio-metrics-test', version: '1' } },
  });
  assert.ok(init.session, 'initialize returned no session id');
  return init.session;
}

const callEcho = (url: string, cls: string, session: string, id: number, text: string) =>
  rpc(url, cls, { jsonrpc: '2.0', id, method: 'tools/call', params: { name: 'echo', arguments: { text } } }, session);

describe("a runtime node's stdio trouble on /metrics", () => {
  let node: RuntimeNode | undefined;
  after(() => node?.close());

  it('counts messages refused for backlog, servers stopped as stuck and sandboxes that died, by class', async () => {
    const clock = new ManualClock();
    node = await startRuntimeNode({
      ...(await nodeOptions({ deaf: unrulyClass('deaf'), crash: unrulyClass('crash'), demo: { engine: 'builtin' } })),
      sessionIdleMs: 10 * 60_000,
      clock,
    });
    const url = node.directUrl!;
    const series = (name: string, cls: string) => `switchyard_runtime_${name}{class="${cls}"}`;
    // Every configured class is there from the start, so a rate over it needs no first event.
    assert.equal(await scrape(url, series('stdio_messages_refused_total', 'deaf')), 0);
    assert.equal(await scrape(url, series('stdio_servers_stalled_total', 'crash')), 0);
    assert.equal(await scrape(url, series('sandboxes_died_total', 'demo')), 0);
    assert.equal(
      await scrape(url, series('stdio_messages_refused_total', 'demo')),
      undefined,
      'no stdio series for a builtin class',
    );

    const deaf = await initialize(url, 'deaf');
    const replies = Array.from({ length: CALLS + 1 }, (_, id) =>
      callEcho(url, 'deaf', deaf, id + 1, id ? TEXT : 'stop'),
    );
    const messages: string[] = [];
    for (const reply of replies) void reply.then(({ json }) => messages.push(json.error?.message ?? 'answered'));
    const refused = () => messages.filter((m) => /not reading its input/.test(m)).length;
    // No more than 17 calls of 1 MiB fit under 16 MiB: the others are refused, at once.
    await waitFor('the calls past the cap to be refused', () => refused() >= CALLS - 17);
    assert.equal(await scrape(url, series('stdio_messages_refused_total', 'deaf')), refused());
    assert.equal(await scrape(url, series('stdio_servers_stalled_total', 'deaf')), 0);

    await clock.advance(60_000);
    await Promise.all(replies);
    assert.equal(await scrape(url, series('stdio_servers_stalled_total', 'deaf')), 1);
    assert.equal(await scrape(url, series('stdio_messages_refused_total', 'deaf')), refused());
    await waitFor('the stopped server to be counted as died', async () => {
      return (await scrape(url, series('sandboxes_died_total', 'deaf'))) === 1;
    });

    const crash = await initialize(url, 'crash');
    const crashed = await callEcho(url, 'crash', crash, 1, 'crash now');
    assert.ok(crashed.json.error, 'the call of a server that crashed is answered with an error');
    await waitFor('the crashed server to be counted as died', async () => {
      return (await scrape(url, series('sandboxes_died_total', 'crash'))) === 1;
    });
    assert.equal(await scrape(url, series('stdio_servers_stalled_total', 'crash')), 0);
    assert.equal(await scrape(url, series('sandboxes_died_total', 'demo')), 0);
  });
});
