// Counting tool calls (the host's onToolCall) wraps the tools/call handler of the SDK servers built for
// sandboxes. Clients must not see the difference: a sandbox that declares `tools` answers tools/list as a
// plain McpServer does, counted or not, even before any tool is installed on it (a list that is empty now).
import assert from 'node:assert/strict';
import { after, afterEach, before, describe, it } from 'node:test';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { acceptedContent, inputRequired } from '@modelcontextprotocol/server';
import { ManualClock } from '@switchyard/clock/testing';
import type { Engine, SandboxHost, SandboxInstance } from '@switchyard/sandbox';
import { z } from 'zod';
import { FLAVOURS, connect } from './fixtures/clients.ts';
import { serveHttp1, type Served, testHost } from './fixtures/harness.ts';

/** A custom engine whose sandboxes declare `capabilities` and install on each server what `register` does. */
function engineOf(
  register: SandboxInstance['register'],
  capabilities: SandboxInstance['capabilities'] = { tools: {} },
): Engine {
  return {
    async create() {
      return { capabilities, dead: false, onDead() {}, bind() {}, register, async destroy() {} };
    },
  };
}

/** Declares `tools` and installs none: a custom engine whose tools come and go (none now). */
const toolless = engineOf(() => () => undefined, { tools: { listChanged: true } });

/**
 * For the enclosing suite: a host serving `engine` as class `default` over HTTP/1.1, recording its
 * onToolCall (as `record` words it, none without `record`) in `calls`, and closing the clients put in `open`
 * after each test.
 */
function servedEngine(
  name: string,
  engine: Engine,
  options: { record?: (cls: string, outcome: string, seconds: number) => string; clock?: ManualClock } = {},
): { readonly served: Served; readonly calls: string[]; readonly open: Array<{ close(): Promise<unknown> }> } {
  let host: SandboxHost | undefined;
  let served: Served | undefined;
  const calls: string[] = [];
  const open: Array<{ close(): Promise<unknown> }> = [];
  const { record, clock } = options;
  before(async () => {
    host = testHost({
      runtimeId: 'rt-1',
      classes: { default: { engine: 'custom', name } },
      engines: { [name]: engine },
      ...(clock ? { clock } : {}),
      ...(record ? { onToolCall: (...args: [string, string, number]) => calls.push(record(...args)) } : {}),
    });
    served = await serveHttp1(host);
  });
  afterEach(async () => {
    await Promise.all(open.splice(0).map((c) => c.close()));
  });
  after(async () => {
    await served?.close();
    await host?.close();
  });
  return {
    get served() {
      return served!;
    },
    calls,
    open,
  };
}

for (const counted of [false, true]) {
  describe(`a sandbox that declares tools and has none yet, ${counted ? 'with' : 'without'} onToolCall`, () => {
    const suite = servedEngine('toolless', toolless, counted ? { record: (cls, outcome) => `${cls} ${outcome}` } : {});
    const { calls, open } = suite;

    for (const flavour of FLAVOURS) {
      it(`${flavour}: lists no tools, and a call of one is an error told once`, async () => {
        const c = await connect(flavour, suite.served.url, suite.served.fetch, {
          'x-switchyard-process': `p-${flavour}`,
        });
        open.push(c);
        assert.deepEqual(await c.listToolNames(), []);
        calls.length = 0;
        await assert.rejects(c.callText('echo', { text: 'x' }));
        assert.deepEqual(calls, counted ? ['default error'] : []);
      });
    }
  });
}

/** A tool whose result the SDK's own check of tools/call results refuses (content must be a list of blocks). */
const refused = engineOf((server) => {
  const tool = server.registerTool('refused', {}, () => ({ content: 'not a list' }) as never);
  return () => tool.remove();
});

describe('a tool result the SDK refuses', () => {
  const suite = servedEngine('refused', refused, { record: (cls, outcome) => `${cls} ${outcome}` });
  const { calls, open } = suite;

  for (const flavour of FLAVOURS) {
    it(`${flavour}: reaches the client as an error and is counted as one`, async () => {
      const c = await connect(flavour, suite.served.url, suite.served.fetch, {
        'x-switchyard-process': `p-${flavour}`,
      });
      open.push(c);
      calls.length = 0;
      await assert.rejects(c.callText('refused'), /Invalid tools\/call result/);
      assert.deepEqual(calls, ['default error']);
    });
  }
});

/**
 * A tool that asks its client to confirm before it answers: a call of it takes two rounds, the first
 * answered `input_required` (a 2026-07-28 client retries the call with the answer; toward a legacy
 * client the SDK asks over the session and calls the tool again within the one request).
 */
const confirming = engineOf((server) => {
  const schema = z.object({ confirm: z.boolean() });
  const tool = server.registerTool('confirmed', {}, (ctx) => {
    if (acceptedContent(ctx.mcpReq.inputResponses, 'confirm', schema)?.confirm === true) {
      return { content: [{ type: 'text', text: 'done' }] };
    }
    const confirm = inputRequired.elicit({ message: 'Go?', requestedSchema: schema });
    return inputRequired({ inputRequests: { confirm }, requestState: `asked-${ctx.mcpReq.id}` });
  });
  return () => tool.remove();
});

describe('a tool call that takes several rounds', () => {
  const clock = new ManualClock();
  const suite = servedEngine('confirming', confirming, {
    clock,
    record: (cls, outcome, seconds) => `${cls} ${outcome} ${seconds}`,
  });
  const { calls, open } = suite;

  for (const era of ['legacy', 'modern'] as const) {
    it(`${era}: is counted once, timed from its first round to its last`, async () => {
      const client = new Client(
        { name: 'rounds-test', version: '1' },
        {
          capabilities: { elicitation: { form: {} } },
          ...(era === 'modern' ? { versionNegotiation: { mode: { pin: '2026-07-28' as const } } } : {}),
        },
      );
      // The client's user takes 5 s on the test's clock to answer.
      client.setRequestHandler('elicitation/create', async () => {
        await clock.advance(5000);
        return { action: 'accept', content: { confirm: true } };
      });
      const headers = { 'x-switchyard-process': `p-rounds-${era}` };
      await client.connect(
        new StreamableHTTPClientTransport(new URL('/mcp', suite.served.url), { requestInit: { headers } }),
      );
      open.push(client);
      calls.length = 0;
      const result = await client.callTool({ name: 'confirmed', arguments: {} });
      assert.deepEqual(result.content, [{ type: 'text', text: 'done' }]);
      assert.deepEqual(calls, ['default ok 5']);
    });
  }
});
