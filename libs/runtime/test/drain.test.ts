// A draining node reports no idle weight (schedulers then place no new
// process on it) and says when it holds nothing more: its last session ended
// and that session's sandbox expired. The node's scheduler is unreachable; the
// session goes through the direct listener, and the weight is read from the
// node's own /watch stream, which is what a scheduler reads.
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { startRuntimeNode, type RuntimeNode } from '../src/index.ts';
import { LEGACY, TOKEN, nodeOptions, rpc } from './support.ts';

/** The idle weight in the node's state as a scheduler would read it (the watch stream's snapshot). */
async function reportedWeight(url: string): Promise<Record<string, number>> {
  const stream = new AbortController();
  try {
    const res = await fetch(`${url}/watch`, {
      headers: { authorization: `Bearer ${TOKEN}`, accept: 'text/event-stream' },
      signal: stream.signal,
    });
    assert.equal(res.status, 200);
    const reader = res.body!.pipeThrough(new TextDecoderStream()).getReader();
    let text = '';
    for (;;) {
      const { value, done } = await reader.read();
      assert.ok(!done, `the watch stream ended before its snapshot: ${text}`);
      text += value;
      const data = /^event: snapshot\nid: \d+\ndata: (.+)$/m.exec(text)?.[1];
      if (data) return (JSON.parse(data) as { idleWeight: Record<string, number> }).idleWeight;
    }
  } finally {
    stream.abort();
  }
}

describe('a draining runtime node', () => {
  let node: RuntimeNode | undefined;
  after(() => node?.close());

  it('reports no idle weight at once, and resolves its drain once its last session ended and its sandbox went', async () => {
    node = await startRuntimeNode(await nodeOptions({ demo: { engine: 'builtin', expireSeconds: 0 } }));
    const url = node.directUrl!;
    assert.deepEqual(await reportedWeight(url), { sandboxes: 4 });
    const init = await rpc(url, 'demo', {
      jsonrpc: '2.0',
      id: 1,
      method: 'initialize',
      params: { protocolVersion: LEGACY, capabilities: {}, clientInfo: { name: 'drain-test', version: '1' } },
    });
    assert.ok(init.session);
    assert.deepEqual(await reportedWeight(url), { sandboxes: 3 });

    let drained = false;
    const drain = node.drain().then(() => (drained = true));
    assert.deepEqual(await reportedWeight(url), { sandboxes: 0 });
    await new Promise((resolve) => setTimeout(resolve, 600));
    assert.equal(drained, false, 'a session is still held');
    // The session is still served while the node drains.
    await rpc(url, 'demo', { jsonrpc: '2.0', method: 'notifications/initialized' }, init.session, 202);

    const ended = await fetch(`${url}/mcp`, {
      method: 'DELETE',
      headers: {
        authorization: `Bearer ${TOKEN}`,
        'mcp-protocol-version': LEGACY,
        'mcp-session-id': init.session,
        'x-switchyard-class': 'demo',
      },
    });
    assert.equal(ended.status, 200);
    const endedAt = performance.now();
    await drain;
    assert.ok(
      performance.now() - endedAt < 2000,
      `drained ${performance.now() - endedAt} ms after the last session ended`,
    );
    assert.equal(node.stats().sandboxes, 0);
    // A sandbox freed while draining is not offered again.
    assert.deepEqual(await reportedWeight(url), { sandboxes: 0 });
  });
});
