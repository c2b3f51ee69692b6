// A client's roots reach the server a stdio sandbox runs: the upstream's
// roots/list goes to the client of the call that asked (over that call's
// stream), or, with no call in flight, to the sandbox's only session (over
// its GET stream, refused at once when none is open); a client without roots has it refused as method not
// found, a 2026-07-28 request has it refused at once (no server-to-client
// requests there), and the client's notifications/roots/list_changed
// reaches the upstream.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { Client as V1Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport as V1Transport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ListRootsRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import type { Logger } from '@switchyard/sandbox';
import { captureLogger, type LogLine } from './fixtures/harness.ts';
import { hostSuite } from './fixtures/suite.ts';
import { waitFor } from './fixtures/wait.ts';

const rootsServer = new URL('./fixtures/roots-stdio-server.ts', import.meta.url).pathname;

type Flavour = 'v1' | 'v2-legacy' | 'v2-modern';
/** What the tests need of a v1 or v2 client. */
interface RootsClient {
  call(name: string): Promise<{ text: string; isError: boolean }>;
  /** Sets the roots it answers with and announces the change. */
  changeRoots(uris: string[]): Promise<void>;
  close(): Promise<void>;
}

const asRoots = (uris: string[]) => ({ roots: uris.map((uri) => ({ uri, name: uri.split('/').at(-1) })) });

/**
 * Waits for the upstream's stderr line (logged by the host) past the first
 * `since` log lines, saying what its own ask after an announcement of a
 * change brought; a call made to find out would carry the ask itself.
 */
async function askedAfterChange(logger: Logger & { lines: LogLine[] }, since: number): Promise<string> {
  const said = /^heard 1, asked: (.*)$/;
  const deadline = performance.now() + 10_000;
  for (;;) {
    const line = logger.lines.slice(since).find((l) => said.test(String(l.obj.line)));
    if (line) return said.exec(String(line.obj.line))![1]!;
    if (performance.now() > deadline) throw new Error('timed out waiting for the upstream to ask after the change');
    await new Promise((r) => setTimeout(r, 20));
  }
}

describe('a client’s roots through a stdio sandbox', () => {
  const logger = captureLogger();
  const suite = hostSuite({
    logger,
    runtimeId: 'rt-roots',
    classes: { roots: { engine: 'stdio', command: process.execPath, args: [rootsServer] } },
  });

  /** A client of `flavour` on sandbox `process`, answering roots/list with `uris` unless it declares no roots. */
  async function rootsClient(flavour: Flavour, process: string, uris: string[] | undefined): Promise<RootsClient> {
    let roots = uris ?? [];
    const capabilities = uris ? { roots: { listChanged: true } } : {};
    const url = new URL('/mcp', suite.served.url);
    const requestInit = { headers: { 'x-switchyard-class': 'roots', 'x-switchyard-process': process } };
    const textOf = (result: unknown) => {
      const r = result as { content: Array<{ text?: string }>; isError?: boolean };
      return { text: r.content[0]?.text ?? '', isError: r.isError === true };
    };
    const handle = (client: Client | V1Client, close: () => Promise<void>): RootsClient => ({
      call: async (name) => textOf(await client.callTool({ name, arguments: {} })),
      changeRoots: async (next) => {
        roots = next;
        await client.sendRootsListChanged();
      },
      close,
    });
    if (flavour === 'v1') {
      const client = new V1Client({ name: 'roots-v1', version: '1.0.0' }, { capabilities });
      if (uris) client.setRequestHandler(ListRootsRequestSchema, () => asRoots(roots));
      const transport = new V1Transport(url, { requestInit });
      await client.connect(transport);
      return handle(client, async () => {
        await transport.terminateSession().catch(() => undefined);
        await client.close();
      });
    }
    const modern = flavour === 'v2-modern' ? { versionNegotiation: { mode: { pin: '2026-07-28' as const } } } : {};
    const client = new Client({ name: `roots-${flavour}`, version: '1.0.0' }, { capabilities, ...modern });
    if (uris) client.setRequestHandler('roots/list', () => asRoots(roots));
    const transport = new StreamableHTTPClientTransport(url, { requestInit });
    await client.connect(transport);
    return handle(client, async () => {
      if (flavour === 'v2-legacy') await transport.terminateSession().catch(() => undefined);
      await client.close();
    });
  }

  for (const flavour of ['v1', 'v2-legacy'] as const) {
    it(`${flavour}: the upstream gets the roots of the client whose call asks for them`, async () => {
      const client = await rootsClient(flavour, `asks-${flavour}`, ['file:///work/a', 'file:///work/b']);
      try {
        assert.deepEqual(await client.call('roots'), {
          text: JSON.stringify(['file:///work/a', 'file:///work/b']),
          isError: false,
        });
      } finally {
        await client.close();
      }
    });
  }

  it('v2-legacy: a client that declared no roots has the ask refused as method not found, at once', async () => {
    const client = await rootsClient('v2-legacy', 'no-roots', undefined);
    try {
      const started = performance.now();
      const result = await client.call('roots');
      assert.equal(result.isError, true);
      assert.match(result.text, /Method not found/);
      assert.ok(performance.now() - started < 5000, 'refused, not left to time out');
    } finally {
      await client.close();
    }
  });

  it('v2-modern: the upstream gets the roots in a round of the call, as the 2026-07-28 revision asks a client', async () => {
    const client = await rootsClient('v2-modern', 'modern-roots', ['file:///work/modern']);
    try {
      assert.deepEqual(await client.call('roots'), { text: JSON.stringify(['file:///work/modern']), isError: false });
    } finally {
      await client.close();
    }
  });

  for (const flavour of ['v1', 'v2-legacy'] as const) {
    it(`${flavour}: a change of roots reaches the upstream, whose own ask then gets the new roots over the session's stream`, async () => {
      const client = await rootsClient(flavour, `changes-${flavour}`, ['file:///work/old']);
      try {
        // Its GET stream open (the SDK opens it after connect resolves): an ask sent on none is lost.
        await waitFor('the session’s GET stream', () => suite.host.stats().eventStreams === 1);
        const since = logger.lines.length;
        await client.changeRoots(['file:///work/new']);
        assert.equal(await askedAfterChange(logger, since), JSON.stringify(['file:///work/new']));
      } finally {
        await client.close();
      }
    });
  }

  it('a session with no GET stream open has an ask with no call in flight refused at once, not lost', async () => {
    const json = { 'content-type': 'application/json', 'mcp-protocol-version': '2025-11-25' };
    const accept = 'application/json, text/event-stream';
    const post = (headers: Record<string, string>, body: unknown) =>
      fetch(new URL('/mcp', suite.served.url), {
        method: 'POST',
        headers: { ...json, accept, ...headers },
        body: JSON.stringify(body),
      });
    const init = await post(
      { 'x-switchyard-class': 'roots', 'x-switchyard-process': 'no-get-stream' },
      {
        jsonrpc: '2.0',
        id: 1,
        method: 'initialize',
        params: {
          protocolVersion: '2025-11-25',
          capabilities: { roots: { listChanged: true } },
          clientInfo: { name: 'raw', version: '1' },
        },
      },
    );
    await init.text();
    const session = { 'mcp-session-id': init.headers.get('mcp-session-id')! };
    try {
      assert.equal((await post(session, { jsonrpc: '2.0', method: 'notifications/initialized' })).status, 202);
      const since = logger.lines.length;
      const changed = await post(session, { jsonrpc: '2.0', method: 'notifications/roots/list_changed' });
      assert.equal(changed.status, 202);
      assert.match(await askedAfterChange(logger, since), /^error -32603: .*no GET stream open/);
    } finally {
      await fetch(new URL('/mcp', suite.served.url), { method: 'DELETE', headers: { ...json, ...session } });
    }
  });

  it('with several sessions on one sandbox: a call gets its own client’s roots; an ask with no call in flight is refused', async () => {
    const ada = await rootsClient('v2-legacy', 'shared-roots', ['file:///home/ada']);
    const bob = await rootsClient('v1', 'shared-roots', ['file:///home/bob']);
    try {
      // One after the other: calls running at once have the upstream's asks go to the latest (see proxy.ts).
      assert.equal((await ada.call('roots')).text, JSON.stringify(['file:///home/ada']));
      assert.equal((await bob.call('roots')).text, JSON.stringify(['file:///home/bob']));

      const since = logger.lines.length;
      await ada.changeRoots(['file:///home/ada/next']);
      assert.match(await askedAfterChange(logger, since), /^error -32603: .*2 sessions share this sandbox/);
    } finally {
      await Promise.all([ada.close(), bob.close()]);
    }
  });
});
