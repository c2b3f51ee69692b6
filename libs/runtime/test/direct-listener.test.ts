// The direct listener (HTTP/1.1, used by gateways in direct mode) must send
// an SSE response's head at once: a legacy GET stream stays silent until the
// server has something to say, and a proxy in front waits for the head before
// it answers its own client. Through the tunnel HTTP/2 sends HEADERS at once;
// HTTP/1.1 in Node would hold them until the first body write. It admits
// only the bearer tokens its list holds at each request (a token file read
// again when it changes), and none when the list is empty.
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

  it('keeps an idle connection far longer than a gateway does (65 s against 4 s), so the gateway closes first', async () => {
    node ??= await startRuntimeNode(await nodeOptions({ demo: { engine: 'builtin' } }));
    const ok = await fetch(`${node.directUrl!}/healthz`, { headers: { authorization: `Bearer ${TOKEN}` } });
    await ok.body?.cancel();
    assert.equal(ok.headers.get('keep-alive'), 'timeout=65');
  });
});

describe('runtime direct listener with rotating tokens', () => {
  let node: RuntimeNode | undefined;
  after(() => node?.close());

  it('accepts whatever its token list holds at each request, and refuses everything when it holds none', async () => {
    const OLD = 'direct-token-old-0123456789';
    const NEW = 'direct-token-new-0123456789';
    let tokens: readonly string[] = [OLD];
    const errors: string[] = [];
    const options = await nodeOptions({ demo: { engine: 'builtin' } });
    node = await startRuntimeNode({
      ...options,
      direct: { host: '127.0.0.1', port: 0, tokens: () => tokens },
      logger: { ...options.logger, error: (_fields, msg) => void errors.push(String(msg)) },
    });
    const status = async (token: string): Promise<number> => {
      const res = await fetch(`${node!.directUrl}/healthz`, { headers: { authorization: `Bearer ${token}` } });
      await res.body?.cancel();
      return res.status;
    };
    const statuses = async (): Promise<number[]> => [await status(OLD), await status(NEW)];
    assert.deepEqual(await statuses(), [200, 401]);
    tokens = [OLD, NEW];
    assert.deepEqual(await statuses(), [200, 200], 'both during a rotation');
    tokens = [NEW];
    assert.deepEqual(await statuses(), [401, 200], 'the old one is refused once removed');
    assert.deepEqual(errors, []);
    tokens = [];
    assert.deepEqual(await statuses(), [401, 401], 'no token listed opens nothing');
    assert.deepEqual(errors, ['the direct listener has no token: it refuses every request until one is listed']);
  });
});
