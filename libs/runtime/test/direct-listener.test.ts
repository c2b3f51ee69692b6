// The direct listener (HTTP/1.1, used by gateways in direct mode) must send
// an SSE response's head at once: a legacy GET stream stays silent until the
// server has something to say, and a proxy in front waits for the head before
// it answers its own client. Through the tunnel HTTP/2 sends HEADERS at once;
// HTTP/1.1 in Node would hold them until the first body write. It admits
// only its configured bearer token.
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { startRuntimeNode, type RuntimeNode } from '../src/index.ts';
import { LEGACY, TOKEN, nodeOptions, rpc } from './support.ts';

const HEAD_WAIT_MS = 3_000;

describe('runtime direct listener', () => {
  let node: RuntimeNode | undefined;
  after(() => node?.close());

  it("sends an idle GET stream's head before any event", async () => {
    node = await startRuntimeNode(await nodeOptions({ demo: { engine: 'builtin' } }));
    const url = node.directUrl!;
    const init = await rpc(url, 'demo', {
      jsonrpc: '2.0',
      id: 1,
      method: 'initialize',
      params: { protocolVersion: LEGACY, capabilities: {}, clientInfo: { name: 'direct-test', version: '1' } },
    });
    assert.ok(init.session, 'initialize returned no session id');
    await rpc(url, 'demo', { jsonrpc: '2.0', method: 'notifications/initialized' }, init.session, 202);
    const stream = new AbortController();
    const timer = setTimeout(() => stream.abort(), HEAD_WAIT_MS);
    try {
      const res = await fetch(`${url}/mcp`, {
        headers: {
          authorization: `Bearer ${TOKEN}`,
          accept: 'text/event-stream',
          'mcp-protocol-version': LEGACY,
          'mcp-session-id': init.session,
          'x-switchyard-class': 'demo',
        },
        signal: stream.signal,
      }).catch((error: unknown) => {
        throw new Error(`no response head within ${HEAD_WAIT_MS} ms`, { cause: error });
      });
      assert.equal(res.status, 200);
      assert.match(res.headers.get('content-type') ?? '', /^text\/event-stream/);
    } finally {
      clearTimeout(timer);
      stream.abort();
    }
  });

  it('refuses a missing, wrong or partial bearer token with 401, and serves the right one', async () => {
    node ??= await startRuntimeNode(await nodeOptions({ demo: { engine: 'builtin' } }));
    const url = node.directUrl!;
    for (const authorization of [undefined, 'Bearer wrong-token', `Bearer ${TOKEN.slice(0, -1)}`, `Basic ${TOKEN}`]) {
      const res = await fetch(`${url}/healthz`, { headers: authorization ? { authorization } : {} });
      assert.equal(res.status, 401, String(authorization));
      assert.equal(res.headers.get('www-authenticate'), 'Bearer realm="switchyard-runtime"');
      await res.body?.cancel();
    }
    const ok = await fetch(`${url}/healthz`, { headers: { authorization: `Bearer ${TOKEN}` } });
    assert.equal(ok.status, 200);
  });
});
