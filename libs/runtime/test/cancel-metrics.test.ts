// Cancelled tool calls are counted on the runtime's /metrics as a counter
// (`_total`, which Prometheus' rate() and increase() are meant for), next to
// the gauge of the same count that earlier releases exposed. A real node,
// a legacy session over its direct listener, a `notifications/cancelled`.
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { startRuntimeNode, type RuntimeNode } from '../src/index.ts';
import { LEGACY, TOKEN, nodeOptions, rpc, scrape } from './support.ts';

describe("a runtime node's cancelled tool calls on /metrics", () => {
  let node: RuntimeNode | undefined;
  after(() => node?.close());

  it('counts each by class in tool_calls_cancelled_total, a counter from 0', async () => {
    node = await startRuntimeNode(await nodeOptions({ demo: { engine: 'builtin' } }));
    const url = node.directUrl!;
    const name = 'switchyard_runtime_tool_calls_cancelled_total';
    const counter = `${name}{class="demo"}`;
    assert.equal(await scrape(url, counter), 0);
    const init = await rpc(url, 'demo', {
      jsonrpc: '2.0',
      id: 0,
      method: 'initialize',
      params: { protocolVersion: LEGACY, capabilities: {}, clientInfo: { name: 'cancel-metrics-test', version: '1' } },
    });
    const session = init.session!;
    const headers = {
      authorization: `Bearer ${TOKEN}`,
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      'mcp-protocol-version': LEGACY,
      'x-switchyard-class': 'demo',
      'mcp-session-id': session,
    };
    const post = (body: object, signal?: AbortSignal) =>
      fetch(`${url}/mcp`, { method: 'POST', headers, body: JSON.stringify(body), ...(signal ? { signal } : {}) });
    await (await post({ jsonrpc: '2.0', method: 'notifications/initialized' })).text();
    const abort = new AbortController();
    const call = await post(
      { jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'sleep', arguments: { ms: 20_000 } } },
      abort.signal,
    );
    assert.equal(call.status, 200);
    try {
      const cancel = { jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 1 } };
      assert.equal((await post(cancel)).status, 202);
      let counted: number | undefined;
      for (let i = 0; i < 100 && counted !== 1; i++) {
        counted = await scrape(url, counter);
        if (counted !== 1) await new Promise((r) => setTimeout(r, 20));
      }
      assert.equal(counted, 1);
      const res = await fetch(`${url}/metrics`, { headers: { authorization: `Bearer ${TOKEN}` } });
      assert.match(await res.text(), new RegExp(`^# TYPE ${name} counter$`, 'm'));
    } finally {
      abort.abort();
    }
  });
});
