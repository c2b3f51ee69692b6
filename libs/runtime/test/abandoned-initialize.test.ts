// A legacy initialize whose client leaves while its sandbox starts opens no
// session that lingers: nobody will use it, and idle it would hold its
// sandbox, and its place under sandboxesMax, for sessionIdleMs. A real node
// (direct listener), a real stdio server (the sandbox lib's unruly fixture,
// `late`) that answers initialize only once the test lets it.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import type { MeteringEvent } from '@switchyard/sandbox';
import { startRuntimeNode, type RuntimeNode } from '../src/index.ts';
import { LEGACY, TOKEN, nodeOptions, rpc } from './support.ts';

const unruly = new URL('../../sandbox/test/fixtures/unruly-stdio-server.ts', import.meta.url).pathname;
const INITIALIZE = {
  jsonrpc: '2.0',
  id: 1,
  method: 'initialize',
  params: { protocolVersion: LEGACY, capabilities: {}, clientInfo: { name: 'abandoned-test', version: '1' } },
};

async function waitFor(what: string, check: () => boolean | Promise<boolean>, timeoutMs = 10_000): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  while (!(await check())) {
    if (performance.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

/** An initialize on a connection of its own, which `leave()` closes as a client that gives up does. */
function initializeAndLeave(url: string, cls: string): { leave(): void } {
  const req = http.request(`${url}/mcp`, {
    method: 'POST',
    agent: false,
    headers: {
      authorization: `Bearer ${TOKEN}`,
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      'x-switchyard-class': cls,
    },
  });
  req.on('error', () => undefined);
  req.end(JSON.stringify(INITIALIZE));
  return { leave: () => req.destroy() };
}

describe('a legacy initialize whose client leaves while its sandbox starts', () => {
  const dir = mkdtempSync(join(tmpdir(), 'switchyard-abandoned-'));
  let node: RuntimeNode | undefined;
  after(async () => {
    await node?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('lets its sandbox go at once, so the next initialize finds room under sandboxesMax', async () => {
    const started = join(dir, 'started');
    const metered: MeteringEvent[] = [];
    const options = await nodeOptions({
      late: { engine: 'stdio', command: process.execPath, args: [unruly, 'late', started], expireSeconds: 0 },
    });
    node = await startRuntimeNode({
      ...options,
      sandboxesMax: 1,
      // Far past this test: a session left to idle would hold the sandbox throughout.
      sessionIdleMs: 10 * 60_000,
      sidecarPort: 0,
      meter: { record: (e) => void metered.push(e) },
    });
    const url = node.directUrl!;
    const weight = async () => {
      const res = await fetch(`${node!.sidecarUrl}/state`);
      return ((await res.json()) as { idleWeight: { sandboxes: number } }).idleWeight.sandboxes;
    };
    const openConnections = async () => {
      const gauge = options.metrics.registry.getSingleMetric('switchyard_runtime_connections_open')!;
      return (await gauge.get()).values[0]?.value;
    };

    const client = initializeAndLeave(url, 'late');
    await waitFor('the sandbox to be starting', async () => (await weight()) === 0);
    client.leave();
    // Only that connection reached the direct listener: at 0, the node has seen the client leave.
    await waitFor('the node to see the client leave', async () => (await openConnections()) === 0);
    writeFileSync(started, '');

    await waitFor('the sandbox to have started', () => metered.some((e) => e.event === 'start'));
    await waitFor("the sandbox's place to come back", async () => (await weight()) === 1);
    assert.deepEqual(
      metered.map((e) => `${e.event} ${e.reason}`),
      // The initialize named no process: the sandbox was its own, and ended with it.
      ['start created', 'recycle ended'],
    );
    assert.equal(node.stats().sessions, 0, 'no session is left');
    const next = await rpc(url, 'late', INITIALIZE);
    assert.ok(next.session, 'the next initialize opened a session');
  });
});
