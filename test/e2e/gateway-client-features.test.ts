// Acceptance at the process level: what MCP clients use beyond tools/call,
// walked through the gateway by real SDK clients against the reference
// server (class `everything`) and the builtin demo tools: server→client
// requests answered by the client, its roots and their changes, progress,
// resumption of a dropped stream
// with Last-Event-ID, and a client's answers and cancellations while its
// principal's concurrency limit is full of the calls they concern.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { Client as ClientV1 } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport as TransportV1 } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import {
  CreateMessageRequestSchema,
  ElicitRequestSchema,
  ListRootsRequestSchema,
} from '@modelcontextprotocol/sdk/types.js';
import { cuttableRelay } from '@switchyard/service/testing';
import { startCluster, type TestCluster } from '../support/cluster.ts';
import { until } from '../support/processes.ts';
import {
  LEGACY,
  MODERN,
  callWith,
  connect,
  initializeBody,
  metric,
  post,
  rawLegacySession,
  textOf,
  type AnyClient,
} from './support.ts';

const EVERYTHING = { 'x-switchyard-class': 'everything' };

/** What a client's sampling handler answers: the text names who answered and what was asked. */
const sampled = (who: string, asked: string): string => `${who} read: ${asked}`;

/**
 * An SDK client at `url` that answers sampling with `sampled(who, …)` and
 * elicitation by accepting `{ name: who }`: a legacy one (v1 or v2), or a
 * 2026-07-28 one (v2-modern) of process `who`, which takes them as the
 * input_required rounds of its call, its retries reaching the same sandbox.
 */
async function answeringClient(generation: 'v1' | 'v2' | 'v2-modern', url: string, who: string): Promise<AnyClient> {
  const capabilities = { sampling: {}, elicitation: {} };
  const asked = (params: { messages: Array<{ content: unknown }> }): string =>
    (params.messages[0]!.content as { text: string }).text;
  const answer = (text: string) => ({
    role: 'assistant' as const,
    model: 'test',
    content: { type: 'text' as const, text },
  });
  if (generation === 'v1') {
    const client = new ClientV1({ name: who, version: '1.0.0' }, { capabilities });
    client.setRequestHandler(CreateMessageRequestSchema, (req) => answer(sampled(who, asked(req.params))));
    client.setRequestHandler(ElicitRequestSchema, () => ({ action: 'accept', content: { name: who } }));
    await client.connect(new TransportV1(new URL(url), { requestInit: { headers: EVERYTHING } }));
    return client as unknown as AnyClient;
  }
  const modern = generation === 'v2-modern';
  const client = new Client(
    { name: who, version: '1.0.0' },
    { capabilities, ...(modern ? { versionNegotiation: { mode: { pin: MODERN } } } : {}) },
  );
  client.setRequestHandler('sampling/createMessage', (req) => answer(sampled(who, asked(req.params))));
  client.setRequestHandler('elicitation/create', () => ({ action: 'accept', content: { name: who } }));
  const headers = modern ? { ...EVERYTHING, 'x-switchyard-process': who } : EVERYTHING;
  await client.connect(new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers } }));
  return client as unknown as AnyClient;
}

/** A legacy client whose roots are the URIs `roots.uris` holds when asked, and a way to announce their change. */
type RootsClient = { client: AnyClient; announce: () => Promise<void> };

/** A legacy SDK client (v1 or v2) at `url` declaring roots, answering roots/list with `roots.uris`. */
async function rootsClient(generation: 'v1' | 'v2', url: string, roots: { uris: string[] }): Promise<RootsClient> {
  const capabilities = { roots: { listChanged: true } };
  const listed = () => ({ roots: roots.uris.map((uri) => ({ uri })) });
  const transport = { requestInit: { headers: EVERYTHING } };
  if (generation === 'v1') {
    const client = new ClientV1({ name: 'roots-v1', version: '1.0.0' }, { capabilities });
    client.setRequestHandler(ListRootsRequestSchema, listed);
    await client.connect(new TransportV1(new URL(url), transport));
    return { client: client as unknown as AnyClient, announce: () => client.sendRootsListChanged() };
  }
  const client = new Client({ name: 'roots-v2', version: '1.0.0' }, { capabilities });
  client.setRequestHandler('roots/list', listed);
  await client.connect(new StreamableHTTPClientTransport(new URL(url), transport));
  return { client: client as unknown as AnyClient, announce: () => client.sendRootsListChanged() };
}

/** Ends a legacy session with DELETE, then closes the client. */
async function closeSession(client: AnyClient): Promise<void> {
  const transport = (client as unknown as { transport?: { terminateSession?(): Promise<void> } }).transport;
  await transport?.terminateSession?.().catch(() => undefined);
  await client.close();
}

/** The events of an SSE body, each as its `id` and parsed `data` (events without data are skipped). */
async function* sseEvents(body: ReadableStream<Uint8Array>): AsyncGenerator<{ id?: string; data: unknown }> {
  const decoder = new TextDecoder();
  let buffered = '';
  for await (const chunk of body) {
    buffered += decoder.decode(chunk, { stream: true });
    for (let end = buffered.indexOf('\n\n'); end >= 0; end = buffered.indexOf('\n\n')) {
      const fields = new Map<string, string>();
      for (const line of buffered.slice(0, end).split('\n')) {
        const colon = line.indexOf(':');
        if (colon > 0) fields.set(line.slice(0, colon), line.slice(colon + 1).trimStart());
      }
      buffered = buffered.slice(end + 2);
      const data = fields.get('data');
      if (data) yield { ...(fields.has('id') ? { id: fields.get('id')! } : {}), data: JSON.parse(data) as unknown };
    }
  }
}

type Rpc = { method?: string; params?: { progress?: number }; result?: unknown };

describe('MCP client features through the gateway', () => {
  let cluster: TestCluster;
  before(async () => {
    // Runtimes log at debug: a cancelled call is logged at debug once another was told at info.
    cluster = await startCluster({ schedulers: 1, everything: true, runtimeArgs: ['--log-level', 'debug'] });
  });
  after(() => cluster?.stop());

  for (const generation of ['v1', 'v2', 'v2-modern'] as const) {
    it(`carries the everything server's sampling and elicitation requests to each SDK ${generation} client that asked, and its answers back`, async () => {
      const clients: AnyClient[] = [];
      try {
        // Several sessions at once, on both runtimes: each answer must reach the sandbox whose call asked.
        const whos = Array.from({ length: 6 }, (_, i) => `${generation}-client-${i}`);
        for (const who of whos) clients.push(await answeringClient(generation, cluster.gatewayUrl(), who));
        const results = await Promise.all(
          clients.map(async (client, i) => ({
            sampling: textOf(
              await client.callTool({ name: 'trigger-sampling-request', arguments: { prompt: `p${i}`, maxTokens: 5 } }),
            ),
            elicitation: textOf(await client.callTool({ name: 'trigger-elicitation-request', arguments: {} })),
          })),
        );
        results.forEach(({ sampling, elicitation }, i) => {
          const text = sampled(whos[i]!, `Resource trigger-sampling-request context: p${i}`);
          assert.ok(sampling.includes(JSON.stringify(text)), `session ${i} got its own sampling answer: ${sampling}`);
          assert.match(elicitation, new RegExp(`Name: ${whos[i]}\\b`), `session ${i}: ${elicitation}`);
        });
      } finally {
        await Promise.all(clients.map(closeSession));
      }
    });
  }

  for (const generation of ['v1', 'v2'] as const) {
    it(`hands the everything server the roots of an SDK ${generation} client, and their change once it announces one`, async () => {
      const roots = { uris: ['file:///work/first'] };
      const { client, announce } = await rootsClient(generation, cluster.gatewayUrl(), roots);
      try {
        const listed = async () => textOf(await client.callTool({ name: 'get-roots-list', arguments: {} }));
        assert.match(await listed(), /Current MCP Roots \(1 total\)[\s\S]*URI: file:\/\/\/work\/first/);
        roots.uris = ['file:///work/second', 'file:///work/third'];
        await announce();
        // The server asks again when told, and keeps what it got; a call made meanwhile sees the old roots.
        const changed = await until('the server to have the changed roots', async () => {
          const text = await listed();
          return /URI: file:\/\/\/work\/third/.test(text) && text;
        });
        assert.match(changed, /Current MCP Roots \(2 total\)[\s\S]*URI: file:\/\/\/work\/second/);
      } finally {
        await closeSession(client);
      }
    });
  }

  it('answers at once the roots tool of an SDK client that declared no roots, which is not asked for them', async () => {
    const client = await connect('v2', cluster.gatewayUrl(), EVERYTHING);
    try {
      const result = await callWith('v2', client, { name: 'get-roots-list', arguments: {} }, { timeout: 10_000 });
      assert.match(textOf(result), /no roots are currently configured/);
    } finally {
      await closeSession(client);
    }
  });

  const progressions = [
    { generation: 'v1', headers: EVERYTHING },
    { generation: 'v2', headers: EVERYTHING },
    { generation: 'v2-modern', headers: { ...EVERYTHING, 'x-switchyard-process': 'progressing' } },
  ] as const;
  for (const { generation, headers } of progressions) {
    it(`relays every progress notification of a long-running operation to an SDK ${generation} client, in order`, async () => {
      const client = await connect(generation, cluster.gatewayUrl(), headers);
      try {
        const seen: Array<{ progress: number; total?: number }> = [];
        const result = await callWith(
          generation,
          client,
          { name: 'trigger-long-running-operation', arguments: { duration: 0.4, steps: 4 } },
          { onprogress: (p) => seen.push(p as { progress: number; total?: number }) },
        );
        assert.deepEqual(
          seen.map((p) => [p.progress, p.total]),
          [1, 2, 3, 4].map((n) => [n, 4]),
        );
        assert.match(textOf(result), /^Long running operation completed\. Duration: 0\.4 seconds, Steps: 4\.$/);
      } finally {
        await closeSession(client);
      }
    });
  }

  it('resumes a tool call whose POST stream was dropped, from Last-Event-ID, with the events it missed and its result', async () => {
    const url = cluster.gatewayUrl();
    const session = await rawLegacySession(url);
    try {
      const dropped = new AbortController();
      const call = await fetch(url, {
        method: 'POST',
        headers: { ...session, 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
        body: JSON.stringify({
          jsonrpc: '2.0',
          id: 2,
          method: 'tools/call',
          params: { name: 'sleep', arguments: { ms: 1000 }, _meta: { progressToken: 'resumed' } },
        }),
        signal: dropped.signal,
      });
      assert.equal(call.status, 200);
      let lastEventId: string | undefined;
      for await (const event of sseEvents(call.body!)) {
        lastEventId = event.id;
        if ((event.data as Rpc).method === 'notifications/progress') break;
      }
      dropped.abort();
      assert.ok(lastEventId, 'the events of a tool call carry ids');

      const resumed = await fetch(url, {
        headers: { ...session, accept: 'text/event-stream', 'last-event-id': lastEventId },
        signal: AbortSignal.timeout(10_000),
      });
      assert.equal(resumed.status, 200);
      const progress: number[] = [];
      let result: unknown;
      for await (const event of sseEvents(resumed.body!)) {
        const message = event.data as Rpc;
        if (message.method === 'notifications/progress') progress.push(message.params!.progress!);
        if ('result' in message) result = message.result;
      }
      assert.deepEqual(
        progress,
        [200, 300, 400, 500, 600, 700, 800, 900, 1000],
        'every progress after the last one seen',
      );
      assert.equal(textOf(result), 'slept 1000');
    } finally {
      await fetch(url, { method: 'DELETE', headers: session });
    }
  });

  for (const generation of ['v1', 'v2'] as const) {
    it(`has an SDK ${generation} client whose connection drops mid-call resume it through the gateway and get its result`, async () => {
      const relay = await cuttableRelay(Number(new URL(cluster.gatewayUrl()).port));
      const url = `${relay.url}/mcp`;
      const client = await connect(generation, url);
      try {
        const seen: number[] = [];
        const result = await callWith(
          generation,
          client,
          { name: 'sleep', arguments: { ms: 1000 } },
          {
            onprogress: (p) => {
              // Every connection of the client, its POST stream's included, is cut at the first progress.
              if (seen.push((p as { progress: number }).progress) === 1) relay.cut();
            },
          },
        );
        assert.equal(textOf(result), 'slept 1000');
        assert.deepEqual(
          seen,
          Array.from({ length: 10 }, (_, i) => (i + 1) * 100),
        );
        assert.ok(relay.cuts > 0, 'the relay cut a connection');
      } finally {
        await closeSession(client);
        relay.close();
      }
    });
  }

  describe('with a principal whose concurrency limit its calls fill', () => {
    let gatewayUrl: string;
    before(async () => {
      const gateway = await cluster.addGateway(undefined, { args: ['--principal-concurrency-max', '1'] });
      gatewayUrl = `http://127.0.0.1:${gateway.port}/mcp`;
    });

    /**
     * Waits until `count` GET streams are open through the gateway: while one
     * is routed, it holds the one slot too, and a stream of the test before
     * may still be closing.
     */
    const streamsOpen = (count: number): Promise<unknown> =>
      until(
        `${count} GET streams open through the gateway`,
        async () =>
          (await metric(gatewayUrl.replace(/\/mcp$/, ''), 'switchyard_gateway_sse_streams_open')) === count ||
          undefined,
      );

    for (const generation of ['v1', 'v2'] as const) {
      it(`carries the answer of an SDK ${generation} client to a sampling request of its only call`, async () => {
        await streamsOpen(0);
        const client = await answeringClient(generation, gatewayUrl, `limited-${generation}`);
        try {
          await streamsOpen(1);
          const result = await callWith(
            generation,
            client,
            { name: 'trigger-sampling-request', arguments: { prompt: 'limited', maxTokens: 5 } },
            { timeout: 10_000 },
          );
          const text = sampled(`limited-${generation}`, 'Resource trigger-sampling-request context: limited');
          assert.ok(textOf(result).includes(JSON.stringify(text)), textOf(result));
        } finally {
          await closeSession(client);
        }
      });
    }

    it('carries the notifications/cancelled of an SDK v1 client to its only call, which the runtime cancels', async () => {
      const process = 'cancelled-at-limit';
      await streamsOpen(0);
      const client = await connect('v1', gatewayUrl, { 'x-switchyard-process': process });
      try {
        await streamsOpen(1);
        const controller = new AbortController();
        let progressed!: () => void;
        const running = new Promise<void>((resolve) => (progressed = resolve));
        const call = callWith(
          'v1',
          client,
          { name: 'sleep', arguments: { ms: 30_000 } },
          { signal: controller.signal, onprogress: () => progressed() },
        );
        call.catch(() => undefined);
        await running;
        controller.abort();
        await assert.rejects(call, /abort/i);
        const line = await Promise.any(
          cluster.runtimes.map((r) => r.waitForLog((l) => l.event === 'tool.cancelled' && l.sandbox === process, 5000)),
        );
        assert.equal(line.tool, 'sleep');
      } finally {
        await closeSession(client);
      }
    });

    it('still refuses a request, alone or in a batch with a notification, while a call holds the one slot: 429', async () => {
      const init = await post(gatewayUrl, initializeBody(), { 'mcp-protocol-version': LEGACY });
      assert.equal(init.status, 200, init.text);
      const session = { 'mcp-session-id': init.headers.get('mcp-session-id')!, 'mcp-protocol-version': LEGACY };
      try {
        const call = await fetch(gatewayUrl, {
          method: 'POST',
          headers: { ...session, 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
          body: JSON.stringify({
            jsonrpc: '2.0',
            id: 2,
            method: 'tools/call',
            params: { name: 'sleep', arguments: { ms: 1000 }, _meta: { progressToken: 'holds' } },
          }),
          signal: AbortSignal.timeout(10_000),
        });
        assert.equal(call.status, 200);
        const events = sseEvents(call.body!);
        // Its first progress: the call is in flight, holding the slot. (Read by next(): leaving a for-await
        // loop would cancel the body.)
        let first = await events.next();
        while (!first.done && (first.value.data as Rpc).method !== 'notifications/progress')
          first = await events.next();
        const initialized = { jsonrpc: '2.0', method: 'notifications/initialized' };
        for (const body of [
          { jsonrpc: '2.0', id: 3, method: 'tools/list' },
          [initialized, { jsonrpc: '2.0', id: 4, method: 'tools/list' }],
        ]) {
          const refused = await post(gatewayUrl, body, session);
          assert.equal(refused.status, 429, refused.text);
          assert.match(refused.text, /Too many concurrent requests/);
        }
        let result: unknown;
        for await (const event of events) if ('result' in (event.data as Rpc)) result = (event.data as Rpc).result;
        assert.equal(textOf(result), 'slept 1000');
      } finally {
        await fetch(gatewayUrl, { method: 'DELETE', headers: session });
      }
    });
  });
});
