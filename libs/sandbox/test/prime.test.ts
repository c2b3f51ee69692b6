import assert from 'node:assert/strict';
import { once } from 'node:events';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import type { Client } from '@modelcontextprotocol/client';
import type { SandboxHost } from '@switchyard/sandbox';
import { connect, type TestClient } from './fixtures/clients.ts';
import { serveHttp1, type Served, testHost, remoteDemo } from './fixtures/harness.ts';

const listing = new URL('./fixtures/listing-stdio-server.ts', import.meta.url).pathname;
const ABSENT = 'tools/call switchyard-warm-up-absent-tool';

async function waitFor(what: string, check: () => boolean, timeoutMs = 15_000): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  while (!check()) {
    if (performance.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

/** What the upstream child was asked so far (the `seen` call itself is its last entry). */
async function seen(c: TestClient): Promise<string[]> {
  return (JSON.parse(await c.callText('seen')) as string[]).slice(0, -1);
}

describe('warm-pool priming and upstream list caching (stdio)', () => {
  let host: SandboxHost;
  let served: Served;
  const opened: TestClient[] = [];

  before(async () => {
    host = testHost({
      runtimeId: 'rt-prime',
      classes: {
        announcing: { engine: 'stdio', command: process.execPath, args: [listing], warmPool: 1, expireSeconds: 0 },
        quiet: {
          engine: 'stdio',
          command: process.execPath,
          args: [listing, '--quiet-lists'],
          warmPool: 1,
          expireSeconds: 0,
        },
        cold: { engine: 'stdio', command: process.execPath, args: [listing], expireSeconds: 0 },
      },
    });
    served = await serveHttp1(host);
    await waitFor('both pools to fill', () => host.stats().warm === 2);
  });
  after(async () => {
    for (const c of opened) await c.close().catch(() => undefined);
    await served.close();
    await host.close();
  });

  async function open(className: string, process: string): Promise<TestClient> {
    const c = await connect('v2-legacy', served.url, served.fetch, {
      'x-switchyard-class': className,
      'x-switchyard-process': process,
    });
    opened.push(c);
    return c;
  }

  const primed = ['initialize', 'tools/list', ABSENT];
  const cases = [
    {
      name: 'a pooled child that announces list changes was listed and warmed before the session, and lists from cache',
      className: 'announcing',
      before: primed,
      afterTwoLists: primed,
    },
    {
      name: 'a pooled child that does not announce list changes was warmed too, but every list reaches it',
      className: 'quiet',
      before: primed,
      afterTwoLists: [...primed, 'tools/list', 'tools/list'],
    },
    {
      name: 'a sandbox started on demand is not primed, and its first list reaches the child',
      className: 'cold',
      before: ['initialize'],
      afterTwoLists: ['initialize', 'tools/list'],
    },
  ];
  for (const c of cases) {
    it(c.name, async () => {
      const client = await open(c.className, `p-${c.className}`);
      assert.deepEqual(await seen(client), c.before);
      const names = await client.listToolNames();
      assert.deepEqual(await client.listToolNames(), names);
      assert.deepEqual(names, ['echo', 'grow', 'seen']);
      const upstream = (await seen(client)).filter((m) => !m.startsWith('tools/call seen'));
      assert.deepEqual(upstream, c.afterTwoLists);
    });
  }

  // The fixture announces before it answers `grow`, so the eviction has happened when the call returns.
  it('a list_changed announcement evicts the cached list, so the next list shows the new tool', async () => {
    const client = await open('announcing', 'p-grow');
    assert.deepEqual(await client.listToolNames(), ['echo', 'grow', 'seen']);
    assert.equal(await client.callText('grow'), 'grown');
    assert.deepEqual(await client.listToolNames(), ['echo', 'grow', 'grown-3', 'seen']);
    assert.deepEqual(await client.listToolNames(), ['echo', 'grow', 'grown-3', 'seen']);
    const lists = (await seen(client)).filter((m) => m === 'tools/list');
    assert.equal(lists.length, 2, 'one upstream list before the announcement (priming or first) and one after');
  });

  it("a 2026-07-28 listen stream hears its own sandbox's tool list change, and no other sandbox's", async () => {
    const listener = async (process: string) => {
      const c = await connect('v2-modern', served.url, served.fetch, {
        'x-switchyard-class': 'announcing',
        'x-switchyard-process': process,
      });
      opened.push(c);
      const heard = { changes: 0 };
      const raw = c.raw as Client;
      raw.setNotificationHandler('notifications/tools/list_changed', () => void heard.changes++);
      return { stream: await raw.listen({ toolsListChanged: true }), heard };
    };
    const watcher = await listener('p-listen');
    const bystander = await listener('p-listen-other');
    try {
      const grower = await open('announcing', 'p-listen');
      assert.equal(await grower.callText('grow'), 'grown');
      await waitFor('the change on the listen stream', () => watcher.heard.changes > 0);
      // Both sandboxes' children run the same fixture, so a change routed by class instead of sandbox would show here.
      await new Promise((r) => setTimeout(r, 200));
      assert.equal(watcher.heard.changes, 1);
      assert.equal(bystander.heard.changes, 0);
    } finally {
      await Promise.all([watcher.stream.close(), bystander.stream.close()]);
    }
  });
});

describe('upstream list caching (http)', () => {
  let upstream: SandboxHost;
  let upstreamServer: http.Server;
  let host: SandboxHost;
  let served: Served;
  let upstreamLists = 0;

  before(async () => {
    upstream = testHost({
      runtimeId: 'rt-up',
      classes: { demo: { engine: 'builtin' } },
    });
    // Counts the lists that reach the remote server; the body is peeked, not consumed.
    upstreamServer = http.createServer((req, res) => {
      req.on('data', (chunk: Buffer) => {
        if (chunk.toString('utf8').includes('"tools/list"')) upstreamLists++;
      });
      void upstream.handleMcp(req, res);
    });
    upstreamServer.listen(0, '127.0.0.1');
    await once(upstreamServer, 'listening');
    const { port } = upstreamServer.address() as AddressInfo;
    host = testHost({
      runtimeId: 'rt-proxy',
      classes: {
        remote: remoteDemo(`http://127.0.0.1:${port}/mcp`),
      },
    });
    served = await serveHttp1(host);
  });
  after(async () => {
    await served.close();
    await host.close();
    upstreamServer.closeAllConnections();
    await new Promise((r) => upstreamServer.close(r));
    await upstream.close();
  });

  it('a remote server that announces list changes is still listed through, as it may have no channel to announce on', async () => {
    const client = await connect('v2-legacy', served.url, served.fetch, {
      'x-switchyard-class': 'remote',
      'x-switchyard-process': 'via-http',
    });
    try {
      for (let i = 1; i <= 2; i++) {
        assert.deepEqual(await client.listToolNames(), ['counter', 'echo', 'sleep', 'whoami']);
        assert.equal(upstreamLists, i);
      }
    } finally {
      await client.close();
    }
  });
});
