// The direct listener (HTTP/1.1, used by gateways in direct mode) must send
// an SSE response's head at once: a legacy GET stream stays silent until the
// server has something to say, and a proxy in front waits for the head before
// it answers its own client. Through the tunnel HTTP/2 sends HEADERS at once;
// HTTP/1.1 in Node would hold them until the first body write. It admits
// only the bearer tokens its list holds at each request (a token file read
// again when it changes), and none when the list is empty; a request it let
// in (an event stream may stay open for hours) ends once its token is removed.
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { ManualClock, within } from '@switchyard/clock/testing';
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

/** A legacy session opened on the direct listener, and its standalone GET stream, both with `token`. */
async function openSessionStream(url: string, token: string, signal: AbortSignal): Promise<Response> {
  const init = await rpc(
    url,
    'demo',
    {
      jsonrpc: '2.0',
      id: 1,
      method: 'initialize',
      params: { protocolVersion: LEGACY, capabilities: {}, clientInfo: { name: 'direct-test', version: '1' } },
    },
    undefined,
    200,
    token,
  );
  await rpc(url, 'demo', { jsonrpc: '2.0', method: 'notifications/initialized' }, init.session, 202, token);
  const res = await fetch(`${url}/mcp`, {
    headers: {
      authorization: `Bearer ${token}`,
      accept: 'text/event-stream',
      'mcp-protocol-version': LEGACY,
      'mcp-session-id': init.session!,
      'x-switchyard-class': 'demo',
    },
    signal,
  });
  assert.equal(res.status, 200);
  return res;
}

/** Resolves once the body of `res` ends, however it ends (a cut connection included). */
async function ended(res: Response): Promise<void> {
  const reader = res.body!.getReader();
  try {
    for (;;) if ((await reader.read()).done) return;
  } catch {
    return;
  }
}

describe('runtime direct listener when a token is removed', () => {
  let node: RuntimeNode | undefined;
  const streams = new AbortController();
  after(async () => {
    streams.abort();
    await node?.close();
  });

  it('ends the event streams the removed token let in, and only those', async () => {
    const OTHER = 'direct-token-other-0123456789';
    let tokens: readonly string[] = [TOKEN, OTHER];
    const warnings: { fields: object; msg: string }[] = [];
    const clock = new ManualClock();
    const options = await nodeOptions({ demo: { engine: 'builtin' } });
    node = await startRuntimeNode({
      ...options,
      clock,
      direct: { host: '127.0.0.1', port: 0, tokens: () => tokens },
      logger: { ...options.logger, warn: (fields, msg) => void warnings.push({ fields, msg: String(msg) }) },
    });
    const url = node.directUrl!;
    const revoked = await openSessionStream(url, TOKEN, streams.signal);
    const kept = await openSessionStream(url, OTHER, streams.signal);
    tokens = [OTHER];
    await clock.advance(1000);
    await within(ended(revoked), 10_000, 'the stream of the removed token to end');
    const closed = warnings.filter((w) => w.msg === 'closed direct requests whose token was removed');
    assert.deepEqual(closed, [{ fields: { ended: 1 }, msg: 'closed direct requests whose token was removed' }]);
    streams.abort();
    await ended(kept);
  });
});
