import assert from 'node:assert/strict';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import type { Client as V1Client } from '@modelcontextprotocol/sdk/client/index.js';
import { CallToolResultSchema } from '@modelcontextprotocol/sdk/types.js';
import { createRequire } from 'node:module';
import { after, afterEach, before, describe, it } from 'node:test';
import type { SandboxHost } from '@switchyard/sandbox';
import { childPids } from './fixtures/children.ts';
import { connect, type TestClient } from './fixtures/clients.ts';
import { RecordingReporter, serveHttp1, type Served, testHost } from './fixtures/harness.ts';

const everything = createRequire(import.meta.url).resolve('@modelcontextprotocol/server-everything/dist/index.js', {
  paths: [process.cwd()],
});

async function waitFor(what: string, check: () => boolean, timeoutMs = 10_000): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  while (!check()) {
    if (performance.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

describe('stdio engine with server-everything', () => {
  let host: SandboxHost;
  let served: Served;
  let reporter: RecordingReporter;
  const open: TestClient[] = [];

  before(async () => {
    reporter = new RecordingReporter();
    host = testHost({
      runtimeId: 'rt-stdio',
      classes: { everything: { engine: 'stdio', command: process.execPath, args: [everything, 'stdio'] } },
      reporter,
    });
    served = await serveHttp1(host);
  });
  afterEach(async () => {
    await Promise.all(open.splice(0).map((c) => c.close().catch(() => undefined)));
  });
  after(async () => {
    await served.close();
    await host.close();
    assert.deepEqual(childPids(), [], 'close() leaves no child behind');
  });

  for (const flavour of ['v2-legacy', 'v2-modern'] as const) {
    it(`${flavour}: its tools, resources and prompts are re-exposed and callable`, async () => {
      const c = await connect(flavour, served.url, served.fetch, {
        'x-switchyard-class': 'everything',
        'x-switchyard-process': `ev-${flavour}`,
      });
      open.push(c);
      const names = await c.listToolNames();
      assert.ok(names.includes('echo') && names.includes('get-sum'), `tools: ${names.join(',')}`);
      assert.match(await c.callText('echo', { message: 'hi there' }), /hi there/);
      assert.match(await c.callText('get-sum', { a: 2, b: 3 }), /5/);
      const raw = c.raw as Client;
      assert.ok((await raw.listPrompts()).prompts.length > 0);
      assert.ok((await raw.listResources()).resources.length > 0);
    });
  }

  /** A client that answers sampling and elicitation, recording what it was asked. */
  async function askedClient(flavour: 'v2-legacy' | 'v2-modern', asked: string[]): Promise<Client> {
    const client = new Client(
      { name: `asker-${flavour}`, version: '1.0.0' },
      {
        capabilities: { sampling: {}, elicitation: {} },
        ...(flavour === 'v2-modern' ? { versionNegotiation: { mode: { pin: '2026-07-28' as const } } } : {}),
      },
    );
    client.setRequestHandler('sampling/createMessage', (req) => {
      const first = req.params.messages[0]?.content;
      asked.push(`sampling: ${first && 'text' in first ? first.text : '?'}`);
      return { role: 'assistant', content: { type: 'text', text: 'sampled by the client' }, model: 'test-model' };
    });
    client.setRequestHandler('elicitation/create', (req) => {
      asked.push(`elicitation: ${req.params.message}`);
      return { action: 'accept', content: { name: 'Ada' } };
    });
    const headers = { 'x-switchyard-class': 'everything', 'x-switchyard-process': `ask-${flavour}` };
    await client.connect(
      new StreamableHTTPClientTransport(new URL('/mcp', served.url), { fetch: served.fetch, requestInit: { headers } }),
    );
    return client;
  }

  it("v2-legacy: passes the upstream's sampling and elicitation requests to the client and the answers back", async () => {
    const asked: string[] = [];
    const client = await askedClient('v2-legacy', asked);
    try {
      const sampled = await client.callTool({ name: 'trigger-sampling-request', arguments: { prompt: 'a haiku' } });
      assert.match(JSON.stringify(sampled.content), /sampled by the client/);
      const elicited = await client.callTool({ name: 'trigger-elicitation-request', arguments: {} });
      assert.match(JSON.stringify(elicited.content), /Name: Ada/);
      assert.deepEqual(asked, [
        'sampling: Resource trigger-sampling-request context: a haiku',
        'elicitation: Please provide inputs for the following fields:',
      ]);
    } finally {
      await client.close();
    }
  });

  it("v2-modern: asks the client for the upstream's sampling and elicitation in input_required rounds, and passes the answers back", async () => {
    const asked: string[] = [];
    const client = await askedClient('v2-modern', asked);
    try {
      const sampled = await client.callTool({ name: 'trigger-sampling-request', arguments: { prompt: 'a haiku' } });
      assert.match(JSON.stringify(sampled.content), /sampled by the client/);
      const elicited = await client.callTool({ name: 'trigger-elicitation-request', arguments: {} });
      assert.match(JSON.stringify(elicited.content), /Name: Ada/);
      assert.deepEqual(asked, [
        'sampling: Resource trigger-sampling-request context: a haiku',
        'elicitation: Please provide inputs for the following fields:',
      ]);
      const echoed = await client.callTool({ name: 'echo', arguments: { message: 'still here' } });
      assert.match(JSON.stringify(echoed.content), /still here/);
    } finally {
      await client.close();
    }
  });

  it('v1: a task-augmented tools/call is served as a plain one (no tasks are offered), and a task-only tool says so', async () => {
    const c = await connect('v1', served.url, served.fetch, {
      'x-switchyard-class': 'everything',
      'x-switchyard-process': 'ev-v2-legacy',
    });
    open.push(c);
    const raw = c.raw as V1Client;
    const asTask = (name: string, args: Record<string, unknown>) =>
      raw.request(
        { method: 'tools/call', params: { name, arguments: args, task: { ttl: 60_000 } } },
        CallToolResultSchema,
      );
    const echoed = await asTask('echo', { message: 'as a task' });
    assert.match(JSON.stringify(echoed.content), /as a task/);
    const taskOnly = await asTask('simulate-research-query', { topic: 'cats' });
    assert.equal(taskOnly.isError, true);
    assert.match(JSON.stringify(taskOnly.content), /requires task augmentation/);
    assert.match(await c.callText('echo', { message: 'still here' }), /still here/);
  });

  it("v2-legacy: relays the upstream's log messages at each client's level, and resource updates to subscribers only", async () => {
    /** A legacy client on the shared sandbox that records what reaches it on its GET stream. */
    const listener = async (name: string) => {
      const client = new Client({ name, version: '1.0.0' });
      const seen = { logs: [] as string[], texts: [] as string[], updated: [] as string[] };
      client.setNotificationHandler('notifications/message', (n) => {
        seen.logs.push(n.params.level);
        seen.texts.push(String(n.params.data));
      });
      client.setNotificationHandler('notifications/resources/updated', (n) => void seen.updated.push(n.params.uri));
      const headers = { 'x-switchyard-class': 'everything', 'x-switchyard-process': 'ev-notify' };
      await client.connect(
        new StreamableHTTPClientTransport(new URL('/mcp', served.url), {
          fetch: served.fetch,
          requestInit: { headers },
        }),
      );
      return { client, seen };
    };
    const subscriber = await listener('subscriber');
    const bystander = await listener('bystander');
    try {
      const { resources } = await subscriber.client.listResources();
      const uri = resources[0]!.uri;
      // Only the most severe messages for the subscriber; the bystander sets no level and gets every one.
      await subscriber.client.setLoggingLevel('emergency');
      await subscriber.client.subscribeResource({ uri });
      // server-everything's own timers: a random-level log message and an update of each subscribed resource every 5 s.
      await subscriber.client.callTool({ name: 'toggle-subscriber-updates', arguments: {} });
      await subscriber.client.callTool({ name: 'toggle-simulated-logging', arguments: {} });
      await waitFor(
        'a resource update for the subscriber and log messages for the bystander',
        () => subscriber.seen.updated.length > 0 && bystander.seen.logs.length > 1,
        15_000,
      );
      assert.deepEqual([...new Set(subscriber.seen.updated)], [uri]);
      assert.deepEqual(bystander.seen.updated, [], 'no updates for a client that did not subscribe');
      assert.deepEqual(
        subscriber.seen.logs.filter((level) => level !== 'emergency'),
        [],
        'the subscriber only gets messages at or above its level',
      );
      // The last subscriber leaving (DELETE) unsubscribes the upstream, which says so in a log message.
      await (subscriber.client.transport as StreamableHTTPClientTransport).terminateSession();
      await waitFor('the upstream to be unsubscribed', () =>
        bystander.seen.texts.some((t) => t.includes('Unsubscribe')),
      );
    } finally {
      await Promise.all([subscriber.client.close(), bystander.client.close()]);
    }
  });

  it('v2-modern: a listen stream gets the updates of the resources it names from its own sandbox only, and the upstream is unsubscribed when it closes', async () => {
    const headers = (process: string) => ({ 'x-switchyard-class': 'everything', 'x-switchyard-process': process });
    const modern = async (process: string) => {
      const c = await connect('v2-modern', served.url, served.fetch, headers(process));
      open.push(c);
      const updated: string[] = [];
      const raw = c.raw as Client;
      raw.setNotificationHandler('notifications/resources/updated', (n) => void updated.push(n.params.uri));
      return { raw, updated };
    };
    const watcher = await modern('ev-listen');
    const elsewhere = await modern('ev-v2-modern');
    // A legacy session on the watcher's sandbox reads the upstream's log messages, which tell of (un)subscriptions.
    const bystander = new Client({ name: 'bystander', version: '1.0.0' });
    const texts: string[] = [];
    bystander.setNotificationHandler('notifications/message', (n) => void texts.push(String(n.params.data)));
    await bystander.connect(
      new StreamableHTTPClientTransport(new URL('/mcp', served.url), {
        fetch: served.fetch,
        requestInit: { headers: headers('ev-listen') },
      }),
    );
    try {
      const { resources } = await watcher.raw.listResources();
      const uri = resources[0]!.uri;
      const listening = await watcher.raw.listen({ resourceSubscriptions: [uri] });
      const other = await elsewhere.raw.listen({ resourceSubscriptions: [uri] });
      // server-everything updates each subscribed resource every 5 s once toggled.
      await watcher.raw.callTool({ name: 'toggle-subscriber-updates', arguments: {} });
      await waitFor('an update on the listen stream', () => watcher.updated.length > 0, 15_000);
      assert.deepEqual([...new Set(watcher.updated)], [uri]);
      assert.deepEqual(elsewhere.updated, [], "another sandbox's listen stream gets none");
      await listening.close();
      await other.close();
      await waitFor('the upstream to be unsubscribed', () => texts.some((t) => t.includes('Unsubscribe')));
    } finally {
      await bystander.close();
    }
  });

  for (const flavour of ['v2-legacy', 'v2-modern'] as const) {
    it(`${flavour}: relays every upstream progress notification before the result`, async () => {
      const c = await connect(flavour, served.url, served.fetch, {
        'x-switchyard-class': 'everything',
        'x-switchyard-process': `progress-${flavour}`,
      });
      open.push(c);
      const progress: number[] = [];
      const result = await (c.raw as Client).callTool(
        { name: 'trigger-long-running-operation', arguments: { duration: 0.3, steps: 3 } },
        { onprogress: (p) => void progress.push(p.progress) },
      );
      assert.match(JSON.stringify(result.content), /Long running operation completed/);
      assert.deepEqual(progress, [1, 2, 3]);
    });
  }

  for (const flavour of ['v2-legacy', 'v2-modern'] as const) {
    it(`${flavour}: a call its client cancels is counted as cancelled, as a builtin one is`, async () => {
      const c = await connect(flavour, served.url, served.fetch, {
        'x-switchyard-class': 'everything',
        'x-switchyard-process': `progress-${flavour}`, // the sandbox of the test above: the host's limit is 10
      });
      open.push(c);
      const before = host.stats().cancelled;
      const abort = new AbortController();
      const call = (c.raw as Client).callTool(
        { name: 'trigger-long-running-operation', arguments: { duration: 20, steps: 20 } },
        { signal: abort.signal, onprogress: () => abort.abort() },
      );
      await assert.rejects(call, /abort/i);
      await waitFor('the cancellation to be counted', () => host.stats().cancelled === before + 1);
    });
  }

  it('a killed child turns the next request into 404 (legacy) or an error (stateless), then the sandbox comes back', async () => {
    const headers = { 'x-switchyard-class': 'everything', 'x-switchyard-process': 'ev-crash' };
    const before = new Set(childPids());
    const legacy = await connect('v2-legacy', served.url, served.fetch, headers);
    open.push(legacy);
    const child = childPids().find((p) => !before.has(p));
    assert.ok(child, 'a child was spawned for the sandbox');
    process.kill(child, 'SIGKILL');
    await waitFor('the sandbox to be reported removed', () => !reporter.processes.has('ev-crash'));

    const res = await fetch(`${served.url}/mcp`, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
        'mcp-session-id': legacy.sessionId!,
        'mcp-protocol-version': '2025-11-25',
      },
      body: JSON.stringify({ jsonrpc: '2.0', id: 9, method: 'tools/list' }),
    });
    assert.equal(res.status, 404);

    // The first stateless request (the client's discovery probe) hears of the death…
    await assert.rejects(
      connect('v2-modern', served.url, served.fetch, headers),
      (e: Error & { data?: { text?: string } }) => /died/.test(e.data?.text ?? ''),
    );
    // …and the next one gets a fresh sandbox.
    const modern = await connect('v2-modern', served.url, served.fetch, headers);
    open.push(modern);
    assert.match(await modern.callText('echo', { message: 'again' }), /again/);
    assert.ok(reporter.processes.has('ev-crash'));
  });
});
