// Counting tool calls (the host's onToolCall) wraps the tools/call handler of the SDK servers built for
// sandboxes. Clients must not see the difference: a sandbox that declares `tools` answers tools/list as a
// plain McpServer does, counted or not, even before any tool is installed on it (a list that is empty now).
import assert from 'node:assert/strict';
import { after, afterEach, before, describe, it } from 'node:test';
import type { Engine, SandboxHost } from '@switchyard/sandbox';
import { FLAVOURS, connect, type TestClient } from './fixtures/clients.ts';
import { serveHttp1, type Served, testHost } from './fixtures/harness.ts';

/** Declares `tools` and installs none: a custom engine whose tools come and go (none now). */
const toolless: Engine = {
  async create() {
    return {
      capabilities: { tools: { listChanged: true } },
      dead: false,
      onDead() {},
      bind() {},
      register: () => () => undefined,
      async destroy() {},
    };
  },
};

for (const counted of [false, true]) {
  describe(`a sandbox that declares tools and has none yet, ${counted ? 'with' : 'without'} onToolCall`, () => {
    let host: SandboxHost;
    let served: Served;
    const calls: string[] = [];
    const open: TestClient[] = [];

    before(async () => {
      host = testHost({
        runtimeId: 'rt-1',
        classes: { default: { engine: 'custom', name: 'toolless' } },
        engines: { toolless },
        ...(counted ? { onToolCall: (cls: string, outcome: string) => calls.push(`${cls} ${outcome}`) } : {}),
      });
      served = await serveHttp1(host);
    });
    afterEach(async () => {
      await Promise.all(open.splice(0).map((c) => c.close()));
    });
    after(async () => {
      await served.close();
      await host.close();
    });

    for (const flavour of FLAVOURS) {
      it(`${flavour}: lists no tools, and a call of one is an error told once`, async () => {
        const c = await connect(flavour, served.url, served.fetch, { 'x-switchyard-process': `p-${flavour}` });
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
const refused: Engine = {
  async create() {
    return {
      capabilities: { tools: {} },
      dead: false,
      onDead() {},
      bind() {},
      register(server) {
        const tool = server.registerTool('refused', {}, () => ({ content: 'not a list' }) as never);
        return () => tool.remove();
      },
      async destroy() {},
    };
  },
};

describe('a tool result the SDK refuses', () => {
  let host: SandboxHost;
  let served: Served;
  const calls: string[] = [];
  const open: TestClient[] = [];

  before(async () => {
    host = testHost({
      runtimeId: 'rt-1',
      classes: { default: { engine: 'custom', name: 'refused' } },
      engines: { refused },
      onToolCall: (cls: string, outcome: string) => calls.push(`${cls} ${outcome}`),
    });
    served = await serveHttp1(host);
  });
  afterEach(async () => {
    await Promise.all(open.splice(0).map((c) => c.close()));
  });
  after(async () => {
    await served.close();
    await host.close();
  });

  for (const flavour of FLAVOURS) {
    it(`${flavour}: reaches the client as an error and is counted as one`, async () => {
      const c = await connect(flavour, served.url, served.fetch, { 'x-switchyard-process': `p-${flavour}` });
      open.push(c);
      calls.length = 0;
      await assert.rejects(c.callText('refused'), /Invalid tools\/call result/);
      assert.deepEqual(calls, ['default error']);
    });
  }
});
