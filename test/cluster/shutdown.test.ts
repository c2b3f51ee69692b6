// Closing every part leaves nothing running. A test file whose code leaves
// a handle open never ends (Node's test runner waits for it), which is how a
// whole CI run can hang; this file looks for such leaks on purpose. Two
// scheduler replicas, a runtime and a gateway run in this process and carry
// a legacy session with an open GET stream and a tool call; after every
// close() the event loop must hold no more than it did before they started.
import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { once } from 'node:events';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { createGateway } from '@switchyard/gateway';
import { startReplicas, startRuntime } from '../support/inprocess.ts';

/** What keeps the event loop alive, by kind (`TCPServerWrap`, `Timeout`, …). */
function activeResources(): Map<string, number> {
  const counts = new Map<string, number>();
  for (const kind of process.getActiveResourcesInfo()) counts.set(kind, (counts.get(kind) ?? 0) + 1);
  return counts;
}

/** Kinds of which more are active now than in `before`, with the surplus. */
function surplus(before: Map<string, number>): Record<string, number> {
  const extra: Record<string, number> = {};
  for (const [kind, count] of activeResources()) {
    const more = count - (before.get(kind) ?? 0);
    if (more > 0) extra[kind] = more;
  }
  return extra;
}

describe('shutdown of a whole in-process cluster', () => {
  const cleanups: Array<() => Promise<unknown> | void> = [];
  after(async () => {
    for (const cleanup of cleanups.reverse()) await cleanup();
  });

  it('leaves no handle open once replicas, runtime and gateway are closed after serving a session', async () => {
    const before = activeResources();
    const replicas = await startReplicas(2);
    cleanups.push(() => Promise.all(replicas.map((r) => r.close())));
    const runtime = await startRuntime('rt-shutdown', replicas[1]!.url);
    cleanups.push(() => runtime.close());
    const gateway = createGateway({ schedulers: replicas.map((r) => r.url), defaultClass: 'demo' });
    const server = http.createServer(gateway.app);
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    cleanups.push(() => new Promise((resolve) => server.close(resolve)));
    cleanups.push(() => gateway.close());
    const { port } = server.address() as AddressInfo;

    // Scheduling needs an epoch that holds the runtime; a new replica may take a moment.
    const client = new Client({ name: 'shutdown', version: '1' });
    const url = new URL(`http://127.0.0.1:${port}/mcp`);
    for (let tries = 0; ; tries++) {
      try {
        await client.connect(new StreamableHTTPClientTransport(url));
        break;
      } catch (error) {
        if (tries >= 50) throw error;
        await new Promise((r) => setTimeout(r, 100));
      }
    }
    const reply = await client.callTool({ name: 'echo', arguments: { text: 'bye' } });
    assert.deepEqual(reply.content, [{ type: 'text', text: 'bye' }]);
    assert.ok(surplus(before).TCPSocketWrap, 'the session holds connections while it is open');

    await client.close();
    await gateway.close();
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
    await runtime.close();
    await Promise.all(replicas.map((r) => r.close()));

    // Sockets finish closing within a turn or two of the loop; a leak stays.
    const deadline = performance.now() + 5000;
    while (Object.keys(surplus(before)).length > 0 && performance.now() < deadline) {
      await new Promise((r) => setTimeout(r, 50));
    }
    assert.deepEqual(surplus(before), {}, 'handles still open after every close()');
  });
});
