// A runtime shows on /metrics how its live sandboxes split between classes:
// a real node with two builtin classes, legacy sessions over its direct
// listener (each its own sandbox), ended with DELETE. Sandboxes expire as
// their last session leaves, so the gauge falls as soon as one is ended.
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { startRuntimeNode, type RuntimeNode } from '../src/index.ts';
import { LEGACY, TOKEN, nodeOptions, rpc, scrape } from './support.ts';

const NAME = 'switchyard_runtime_class_sandboxes';
const series = (cls: string): string => `${NAME}{class="${cls}"}`;

describe("a runtime node's live sandboxes by class on /metrics", () => {
  let node: RuntimeNode | undefined;
  after(() => node?.close());

  it('counts each class in class_sandboxes, a gauge from 0 that goes up and down', async () => {
    const classes = {
      demo: { engine: 'builtin', expireSeconds: 0 },
      other: { engine: 'builtin', expireSeconds: 0 },
    } as const;
    node = await startRuntimeNode(await nodeOptions(classes));
    const url = node.directUrl!;
    const counts = async () => ({ demo: await scrape(url, series('demo')), other: await scrape(url, series('other')) });
    assert.deepEqual(await counts(), { demo: 0, other: 0 }, 'every class from 0');

    const open = async (cls: string): Promise<string> => {
      const params = {
        protocolVersion: LEGACY,
        capabilities: {},
        clientInfo: { name: 'class-gauge-test', version: '1' },
      };
      const { session } = await rpc(url, cls, { jsonrpc: '2.0', id: 0, method: 'initialize', params });
      assert.ok(session);
      return session;
    };
    const end = async (cls: string, session: string): Promise<void> => {
      const headers = {
        authorization: `Bearer ${TOKEN}`,
        'mcp-protocol-version': LEGACY,
        'mcp-session-id': session,
        'x-switchyard-class': cls,
      };
      const res = await fetch(`${url}/mcp`, { method: 'DELETE', headers });
      assert.equal(res.status, 200);
    };
    /** The counts once they are `want`: a DELETE's answer may come before its sandbox is let go. */
    const until = async (want: { demo: number; other: number }) => {
      let seen = await counts();
      for (let i = 0; i < 100 && JSON.stringify(seen) !== JSON.stringify(want); i++) {
        await new Promise((r) => setTimeout(r, 20));
        seen = await counts();
      }
      assert.deepEqual(seen, want);
    };

    const demo = await open('demo');
    const others = [await open('other'), await open('other')];
    assert.deepEqual(await counts(), { demo: 1, other: 2 });
    assert.equal(await scrape(url, 'switchyard_runtime_sandboxes'), 3, 'the total is still the sum, unlabelled');

    await end('other', others[0]!);
    await until({ demo: 1, other: 1 });
    await end('demo', demo);
    await until({ demo: 0, other: 1 });
    await end('other', others[1]!);
    await until({ demo: 0, other: 0 });

    const res = await fetch(`${url}/metrics`, { headers: { authorization: `Bearer ${TOKEN}` } });
    assert.match(await res.text(), new RegExp(`^# TYPE ${NAME} gauge$`, 'm'));
  });
});
