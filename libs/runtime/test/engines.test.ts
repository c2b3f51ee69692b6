// The `engines` option reaches the node's sandbox host: a class configured as
// `{engine: 'custom', name}` is served by the engine supplied under that name,
// and a node asked for a custom engine it was not given refuses to start.
// Checked over the node's real direct listener; no scheduler is needed, since
// the direct listener serves MCP while the tunnel keeps redialling.
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import type { McpServer } from '@modelcontextprotocol/server';
import type { Engine, SandboxInstance } from '@switchyard/sandbox';
import { SwitchyardError } from '@switchyard/protocol';
import { startRuntimeNode, type RuntimeNode } from '../src/index.ts';
import { LEGACY, nodeOptions, rpc } from './support.ts';

/** An engine whose sandboxes expose one tool named `tool`. */
function oneToolEngine(tool: string): Engine {
  return {
    async create(): Promise<SandboxInstance> {
      return {
        capabilities: { tools: {} },
        dead: false,
        onDead() {},
        bind() {},
        register(server: McpServer) {
          const registered = server.registerTool(tool, { description: 'fixture' }, () => ({
            content: [{ type: 'text' as const, text: tool }],
          }));
          return () => registered.remove();
        },
        async destroy() {},
      };
    },
  };
}

async function toolNames(url: string, cls: string): Promise<string[]> {
  const init = await rpc(url, cls, {
    jsonrpc: '2.0',
    id: 1,
    method: 'initialize',
    params: { protocolVersion: LEGACY, capabilities: {}, clientInfo: { name: 'engines-test', version: '1' } },
  });
  assert.ok(init.session, 'initialize returned no session id');
  const list = await rpc(url, cls, { jsonrpc: '2.0', id: 2, method: 'tools/list' }, init.session);
  return (list.json.result?.tools ?? []).map((t) => t.name).sort();
}

describe('runtime node engines passthrough', () => {
  const nodes: RuntimeNode[] = [];
  after(async () => {
    await Promise.all(nodes.map((n) => n.close()));
  });

  const served = [
    {
      name: 'serves a custom class with the engine supplied under its name',
      cls: 'fixture',
      want: ['fixture_probe'],
    },
    { name: 'keeps builtin classes beside custom ones', cls: 'demo', want: ['counter', 'echo', 'sleep', 'whoami'] },
  ];
  for (const c of served) {
    it(c.name, async () => {
      const node = await startRuntimeNode(
        await nodeOptions(
          { fixture: { engine: 'custom', name: 'probe' }, demo: { engine: 'builtin' } },
          { probe: oneToolEngine('fixture_probe'), unused: oneToolEngine('never_listed') },
        ),
      );
      nodes.push(node);
      assert.deepEqual(await toolNames(node.directUrl!, c.cls), c.want);
    });
  }

  const refused = [
    { name: 'refuses to start when no engines are supplied', engines: undefined },
    { name: 'refuses to start when the named engine is missing', engines: { other: oneToolEngine('x') } },
  ];
  for (const c of refused) {
    it(c.name, async () => {
      const opts = await nodeOptions({ fixture: { engine: 'custom', name: 'probe' } }, c.engines);
      await assert.rejects(
        startRuntimeNode(opts).then((node) => nodes.push(node)),
        (error: unknown) => error instanceof SwitchyardError && error.code === 'invalid_request',
      );
    });
  }
});
