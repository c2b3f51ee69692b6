// A runtime counts its tool calls on /metrics by class and outcome, and times
// them, once per call, for each engine and both protocol generations: real
// SDK clients against a real node's direct listener, whose classes are a
// builtin one, a stdio one (server-everything as a real child) and an http
// one (a second real node's builtin class as its upstream). Both nodes run on
// one ManualClock, so a duration is the time the test advanced during the call.
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import { after, before, describe, it } from 'node:test';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { ManualClock } from '@switchyard/clock/testing';
import { startRuntimeNode, type RuntimeNode } from '../src/index.ts';
import { TOKEN, nodeOptions } from './support.ts';

const everything = createRequire(import.meta.url).resolve('@modelcontextprotocol/server-everything/dist/index.js', {
  paths: [process.cwd()],
});

const CALLS = 'switchyard_runtime_tool_calls_total';
const DURATIONS = 'switchyard_runtime_tool_call_duration_seconds';

/**
 * Each class's calls: one that succeeds, two that fail (`failing`: arguments its schema refuses, a tool it
 * lacks) and how each fails (an isError result or a JSON-RPC error), one that runs until cancelled.
 */
/** The builtin demo class's calls (see CLASSES). */
const DEMO_CALLS = {
  ok: { name: 'echo', arguments: { text: 'hi' } },
  failing: [
    { name: 'sleep', arguments: { ms: -1 } },
    { name: 'no-such-tool', arguments: {} },
  ],
  fails: ['isError', 'rpcError'],
  long: { name: 'sleep', arguments: { ms: 600_000 } },
} as const;

const CLASSES = {
  demo: DEMO_CALLS,
  child: {
    ok: { name: 'echo', arguments: { message: 'hi' } },
    failing: [
      { name: 'get-sum', arguments: { a: 'two', b: 3 } },
      { name: 'no-such-tool', arguments: {} },
    ],
    fails: ['isError', 'isError'],
    long: { name: 'trigger-long-running-operation', arguments: { duration: 60, steps: 60 } },
  },
  // An http class in front of another runtime's demo class: the same tools, the same calls.
  remote: DEMO_CALLS,
} as const;
type ClassName = keyof typeof CLASSES;

/** Every sample of a text exposition, keyed by name and labels in sorted order: `name{a="1",b="2"}`. */
async function samples(url: string): Promise<Map<string, number>> {
  const res = await fetch(`${url}/metrics`, { headers: { authorization: `Bearer ${TOKEN}` } });
  const text = await res.text();
  assert.equal(res.status, 200, text);
  const out = new Map<string, number>();
  for (const [, name, labels, value] of text.matchAll(/^([a-z_]+)(?:\{([^}]*)\})? (\S+)$/gm)) {
    const sorted = (labels ?? '').split(',').filter(Boolean).sort().join(',');
    out.set(`${name}{${sorted}}`, Number(value));
  }
  return out;
}

const key = (name: string, labels: Record<string, string>): string =>
  `${name}{${Object.entries(labels)
    .map(([k, v]) => `${k}="${v}"`)
    .sort()
    .join(',')}}`;

/** What a class's series are now. */
async function seriesOf(url: string, cls: ClassName) {
  const all = await samples(url);
  const at = (name: string, labels: Record<string, string>) => all.get(key(name, { class: cls, ...labels }));
  return {
    ok: at(CALLS, { outcome: 'ok' }),
    error: at(CALLS, { outcome: 'error' }),
    cancelled: at(CALLS, { outcome: 'cancelled' }),
    count: at(`${DURATIONS}_count`, {}),
    sum: at(`${DURATIONS}_sum`, {}),
    underHalfSecond: at(`${DURATIONS}_bucket`, { le: '0.5' }),
  };
}

async function until(what: string, check: () => boolean | Promise<boolean>): Promise<void> {
  for (let i = 0; i < 500; i++) {
    if (await check()) return;
    await new Promise((r) => setTimeout(r, 20));
  }
  throw new Error(`timed out waiting for ${what}`);
}

describe("a runtime node's tool calls on /metrics", () => {
  const clock = new ManualClock();
  let upstream: RuntimeNode;
  let node: RuntimeNode;
  const clients: Client[] = [];

  before(async () => {
    upstream = await startRuntimeNode({ ...(await nodeOptions({ demo: { engine: 'builtin' } })), clock });
    const headers = { authorization: `Bearer ${TOKEN}`, 'x-switchyard-class': 'demo' };
    node = await startRuntimeNode({
      ...(await nodeOptions({
        demo: { engine: 'builtin' },
        child: { engine: 'stdio', command: process.execPath, args: [everything, 'stdio'] },
        remote: { engine: 'http', url: `${upstream.directUrl!}/mcp`, headers },
      })),
      // A sandbox per modern call, a child for each of the stdio class's.
      sandboxesMax: 16,
      clock,
    });
  });
  after(async () => {
    await Promise.all(clients.map((c) => c.close().catch(() => undefined)));
    await node?.close();
    await upstream?.close();
  });

  it('exports each outcome and an empty duration histogram for every class from the start', async () => {
    for (const cls of Object.keys(CLASSES) as ClassName[]) {
      assert.deepEqual(await seriesOf(node.directUrl!, cls), {
        ok: 0,
        error: 0,
        cancelled: 0,
        count: 0,
        sum: 0,
        underHalfSecond: 0,
      });
    }
  });

  it("counts a REST tool call (a sandbox's toolcall route) as one over MCP", async () => {
    const url = node.directUrl!;
    const post = (path: string, body: object) =>
      fetch(`${url}${path}`, {
        method: 'POST',
        headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
        body: JSON.stringify(body),
      });
    assert.equal((await post('/sandboxes/rest-1', { class: 'demo' })).status, 201);
    const before = await seriesOf(url, 'demo');
    const res = await post('/sandboxes/rest-1/toolcall', CLASSES.demo.ok);
    assert.equal(res.status, 200, await res.clone().text());
    const failed = await post('/sandboxes/rest-1/toolcall', CLASSES.demo.failing[0]);
    assert.equal(((await failed.json()) as { isError?: boolean }).isError, true);
    const now = await seriesOf(url, 'demo');
    assert.deepEqual([now.ok! - before.ok!, now.error! - before.error!, now.count! - before.count!], [1, 1, 2]);
  });

  for (const era of ['legacy', 'modern'] as const) {
    for (const cls of Object.keys(CLASSES) as ClassName[]) {
      it(`counts a ${cls} class's ok, error and cancelled calls over ${era} once each, with their durations`, async (t) => {
        const url = node.directUrl!;
        const calls = CLASSES[cls];
        const client = new Client(
          { name: 'tool-call-metrics-test', version: '1' },
          era === 'modern' ? { versionNegotiation: { mode: { pin: '2026-07-28' } } } : {},
        );
        const transport = new StreamableHTTPClientTransport(new URL(`${url}/mcp`), {
          requestInit: { headers: { authorization: `Bearer ${TOKEN}`, 'x-switchyard-class': cls } },
        });
        await client.connect(transport);
        clients.push(client);
        t.after(() => client.close());
        const before = await seriesOf(url, cls);

        const ok = await client.callTool(calls.ok);
        assert.notEqual(ok.isError, true, JSON.stringify(ok));
        const fails = [];
        for (const call of calls.failing) {
          fails.push(
            await client.callTool(call).then(
              (r) => (r.isError === true ? 'isError' : 'ok'),
              () => 'rpcError',
            ),
          );
        }
        assert.deepEqual(fails, calls.fails);

        // Cancelled once it runs (its first progress), after 1 s of the test's clock.
        const abort = new AbortController();
        let progressed = false;
        const long = client.callTool(calls.long, {
          signal: abort.signal,
          onprogress: () => (progressed = true),
          timeout: 60_000,
        });
        long.catch(() => undefined);
        await until('the long call to report progress', async () => {
          if (!progressed) await clock.advance(100);
          return progressed;
        });
        await clock.advance(1000);
        abort.abort();
        await assert.rejects(long);
        await until('the cancelled call to be counted', async () => {
          const now = await seriesOf(url, cls);
          return now.cancelled! > before.cancelled!;
        });

        const now = await seriesOf(url, cls);
        assert.deepEqual(
          {
            ok: now.ok! - before.ok!,
            error: now.error! - before.error!,
            cancelled: now.cancelled! - before.cancelled!,
          },
          { ok: 1, error: 2, cancelled: 1 },
        );
        assert.equal(now.count! - before.count!, 4, 'each call timed once');
        // The quick calls took no time on the test's clock, the cancelled one at least the 1 s advanced.
        assert.equal(now.underHalfSecond! - before.underHalfSecond!, 3);
        assert.ok(now.sum! - before.sum! >= 1, `sum grew by ${now.sum! - before.sum!}`);
      });
    }
  }
});
