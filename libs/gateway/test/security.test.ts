import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { Server } from 'node:http';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { createGateway, type Gateway } from '@switchyard/gateway';
import { AUDIENCE, ISSUER } from './fixtures/jwks.ts';
import { jwtHarness } from './fixtures/jwt-harness.ts';
import { INITIALIZE, connectV2, listen, post, startHarness, stopServer, textOf } from './harness.ts';
import type { Harness } from './harness.ts';
import { until } from './until.ts';

const ALICE = 'alice-token-0123456789';
const BOB = 'bob-token-9876543210';
const auth = (token: string): Record<string, string> => ({ authorization: `Bearer ${token}` });

describe('gateway security with bearer auth', () => {
  let h: Harness;
  let aliceSession: string;
  before(async () => {
    h = await startHarness(1, {
      auth: { mode: 'bearer', tokens: [ALICE, BOB] },
      allowedOrigins: ['https://app.example'],
      bodyBytesMax: 2048,
      headerBytesMax: 4096,
      principalConcurrencyMax: 2,
    });
    const init = await post(h.url, INITIALIZE, auth(ALICE));
    assert.equal(init.status, 200);
    aliceSession = init.headers.get('mcp-session-id')!;
  });
  after(() => h.close());

  const list = { jsonrpc: '2.0', id: 5, method: 'tools/list' };
  const cases: { name: string; body: unknown; headers: () => Record<string, string>; status: number; rpc: number }[] = [
    {
      name: 'rejects a request without a token with 401',
      body: INITIALIZE,
      headers: () => ({}),
      status: 401,
      rpc: -32001,
    },
    {
      name: 'rejects an unknown token with 401',
      body: INITIALIZE,
      headers: () => auth('nope'),
      status: 401,
      rpc: -32001,
    },
    {
      name: 'rejects a foreign Origin with 403',
      body: INITIALIZE,
      headers: () => ({ ...auth(ALICE), origin: 'https://evil.example' }),
      status: 403,
      rpc: -32000,
    },
    {
      name: 'rejects malformed JSON with 400 -32700',
      body: '{"jsonrpc":',
      headers: () => auth(ALICE),
      status: 400,
      rpc: -32700,
    },
    {
      name: 'requires a session for a non-initialize request (400)',
      body: list,
      headers: () => auth(ALICE),
      status: 400,
      rpc: -32000,
    },
    {
      name: 'rejects an initialize inside a batch with 400 -32600',
      body: [INITIALIZE],
      headers: () => auth(ALICE),
      status: 400,
      rpc: -32600,
    },
    {
      name: 'rejects an unsupported MCP-Protocol-Version with 400 -32022',
      body: INITIALIZE,
      headers: () => ({ ...auth(ALICE), 'mcp-protocol-version': '1999-01-01' }),
      status: 400,
      rpc: -32022,
    },
    {
      name: 'rejects a bad process identity with 400 naming the part',
      body: INITIALIZE,
      headers: () => ({ ...auth(ALICE), 'x-switchyard-process': 'bad value!' }),
      status: 400,
      rpc: -32600,
    },
    {
      name: "hides another principal's session behind 404",
      body: list,
      headers: () => ({ ...auth(BOB), 'mcp-session-id': aliceSession }),
      status: 404,
      rpc: -32001,
    },
    {
      name: 'rejects a body over bodyBytesMax with 413',
      body: { ...list, pad: 'x'.repeat(4096) },
      headers: () => auth(ALICE),
      status: 413,
      rpc: -32000,
    },
    {
      name: 'rejects headers over headerBytesMax with 431',
      body: list,
      headers: () => ({ ...auth(ALICE), 'x-big': 'y'.repeat(5000) }),
      status: 431,
      rpc: -32600,
    },
    {
      name: 'serves the owner of the session (200)',
      body: list,
      headers: () => ({ ...auth(ALICE), 'mcp-session-id': aliceSession, origin: 'https://app.example' }),
      status: 200,
      rpc: 0,
    },
  ];
  for (const c of cases) {
    it(c.name, async () => {
      const res = await post(h.url, c.body, c.headers());
      assert.equal(res.status, c.status);
      const body = res.json as { error?: { code: number } };
      if (c.rpc !== 0) assert.equal(body.error?.code, c.rpc, JSON.stringify(body));
      if (c.status === 401) assert.match(res.headers.get('www-authenticate') ?? '', /^Bearer realm="switchyard"/);
    });
  }

  // RFC 6750 §3.1: a request that authenticates by another method (Basic) gets
  // the challenge without an error code; a refused bearer token gets invalid_token.
  const challenges: { name: string; authorization: string; challenge: string }[] = [
    {
      name: 'a Basic header',
      authorization: `Basic ${btoa(`alice:${ALICE}`)}`,
      challenge: 'Bearer realm="switchyard"',
    },
    { name: 'a Digest header', authorization: 'Digest username="alice"', challenge: 'Bearer realm="switchyard"' },
    {
      name: 'an unknown bearer token',
      authorization: 'bearer nope',
      challenge: 'Bearer realm="switchyard", error="invalid_token", error_description="unknown token"',
    },
  ];
  for (const c of challenges) {
    it(`challenges ${c.name} as RFC 6750 §3.1 says`, async () => {
      const res = await post(h.url, INITIALIZE, { authorization: c.authorization });
      assert.equal(res.status, 401);
      assert.equal(res.headers.get('www-authenticate'), c.challenge);
    });
  }

  // RFC 6750 §3.1 would answer a malformed Bearer header (no token, or one
  // with a space) 400 invalid_request. MCP clients start their auth
  // provider (refresh, sign in again) on a 401 only; on a 400 the SDK's
  // transports just fail. So a malformed header is a token refused, a 401.
  for (const authorization of ['Bearer', 'Bearer two parts']) {
    it(`answers a malformed Bearer header ("${authorization}") 401 invalid_token`, async () => {
      const res = await post(h.url, INITIALIZE, { authorization });
      assert.equal(res.status, 401);
      assert.equal(
        res.headers.get('www-authenticate'),
        'Bearer realm="switchyard", error="invalid_token", error_description="a bearer token is required"',
      );
    });
  }

  it("lets an SDK client's auth provider replace a malformed token and go on", async () => {
    const tokens = ['two parts', ALICE];
    let refreshes = 0;
    const client = new Client({ name: 'test', version: '1.0.0' });
    const authProvider = { token: async () => tokens[refreshes], onUnauthorized: async () => void refreshes++ };
    await client.connect(new StreamableHTTPClientTransport(new URL(h.url), { authProvider }));
    try {
      assert.equal(refreshes, 1, 'the 401 started the auth provider once');
      assert.equal(textOf(await client.callTool({ name: 'echo', arguments: { text: 'hi' } })), 'hi');
    } finally {
      await client.close();
    }
  });

  it('names the offending identity part in the 400 message', async () => {
    const res = await post(h.url, INITIALIZE, { ...auth(ALICE), 'x-switchyard-class': 'no spaces' });
    assert.match((res.json as { error: { message: string } }).error.message, /invalid class identity/);
  });

  it('never forwards Authorization or a forged principal/session header to the runtime', async () => {
    const client = await connectV2(h.url, 'legacy', {
      ...auth(ALICE),
      'X-Switchyard-Principal': 'root',
      'X-Switchyard-Session-Id': 'forged-session',
      Cookie: 'secret=1',
    });
    try {
      const who = JSON.parse(textOf(await client.callTool({ name: 'whoami', arguments: {} })));
      assert.equal(who.authorization, '');
      assert.match(who.principal, /^token:[0-9a-f]{24}$/);
      for (const seen of h.runtimes[0]!.seen) {
        assert.equal(seen.headers.authorization, undefined);
        assert.equal(seen.headers.cookie, undefined);
        assert.notEqual(seen.headers['x-switchyard-principal'], 'root');
        assert.notEqual(seen.headers['x-switchyard-session-id'], 'forged-session');
      }
    } finally {
      await client.close();
    }
  });

  it('answers 429 past principalConcurrencyMax and frees the slot afterwards', async () => {
    const client = await connectV2(h.url, 'modern', auth(BOB));
    try {
      const slow = [1, 2].map(() => client.callTool({ name: 'sleep', arguments: { ms: 400 } }));
      for (let i = 0; i < 400 && h.runtimes[0]!.running.count < 2; i++) await new Promise((r) => setTimeout(r, 5));
      const limited = await post(h.url, INITIALIZE, auth(BOB));
      assert.equal(limited.status, 429);
      assert.equal(limited.headers.get('retry-after'), '1');
      await Promise.all(slow);
      assert.equal((await post(h.url, INITIALIZE, auth(BOB))).status, 200);
    } finally {
      await client.close();
    }
  });
});

describe('gateway concurrency limit and standing streams', () => {
  let h: Harness;
  before(async () => {
    h = await startHarness(1, { auth: { mode: 'bearer', tokens: [ALICE] }, principalConcurrencyMax: 2 });
  });
  after(() => h.close());

  it('does not count open GET streams: a principal holds more sessions with streams than its limit', async () => {
    const streams: AbortController[] = [];
    // Held: fetch cancels the body of a Response that is garbage-collected
    // unread, which would close its stream before it is counted.
    const open: Response[] = [];
    try {
      const sessions: string[] = [];
      for (let i = 0; i < 3; i++) {
        const init = await post(h.url, INITIALIZE, auth(ALICE));
        assert.equal(init.status, 200);
        const session = init.headers.get('mcp-session-id')!;
        sessions.push(session);
        const stream = new AbortController();
        streams.push(stream);
        const res = await fetch(h.url, {
          headers: { ...auth(ALICE), accept: 'text/event-stream', 'mcp-session-id': session },
          signal: stream.signal,
        });
        open.push(res);
        assert.equal(res.status, 200, `GET stream ${i + 1} of 3 (limit 2)`);
        assert.match(res.headers.get('content-type') ?? '', /^text\/event-stream/);
      }
      assert.equal(h.gateway.stats().sseOpen, 3);
      const list = await post(
        h.url,
        { jsonrpc: '2.0', id: 2, method: 'tools/list' },
        {
          ...auth(ALICE),
          'mcp-session-id': sessions[0]!,
        },
      );
      assert.equal(list.status, 200);
    } finally {
      for (const stream of streams) stream.abort();
    }
  });

  it('does not count open subscriptions/listen streams of 2026-07-28 clients', async () => {
    // One at a time: requests being worked on do count, and the limit is 2.
    const clients: Awaited<ReturnType<typeof connectV2>>[] = [];
    for (let i = 0; i < 3; i++) clients.push(await connectV2(h.url, 'modern', auth(ALICE)));
    try {
      for (const client of clients) await client.listen({ toolsListChanged: true });
      assert.equal(textOf(await clients[0]!.callTool({ name: 'echo', arguments: { text: 'past' } })), 'past');
      // Calls in flight still count: two long ones fill the limit.
      const slow = [1, 2].map((i) => clients[i]!.callTool({ name: 'sleep', arguments: { ms: 400 } }));
      for (let i = 0; i < 400 && h.runtimes[0]!.running.count < 2; i++) await new Promise((r) => setTimeout(r, 5));
      assert.equal((await post(h.url, INITIALIZE, auth(ALICE))).status, 429);
      await Promise.all(slow);
    } finally {
      await Promise.all(clients.map((c) => c.close()));
    }
  });
});

describe('gateway JWT auth against a local JWKS', () => {
  const h = jwtHarness({ issuer: ISSUER, audience: AUDIENCE });

  it('accepts a valid token and forwards its subject as the principal', async () => {
    const client = await connectV2(h.url, 'legacy', auth(await h.jwks.sign('user-42')));
    try {
      const who = JSON.parse(textOf(await client.callTool({ name: 'whoami', arguments: {} })));
      assert.deepEqual([who.principal, who.authorization], ['user-42', '']);
    } finally {
      await client.close();
    }
  });

  it('rejects a token for another audience with 401 and an invalid_token challenge', async () => {
    const res = await post(h.url, INITIALIZE, auth(await h.jwks.sign('user-42', 'other')));
    assert.equal(res.status, 401);
    assert.match(res.headers.get('www-authenticate') ?? '', /error="invalid_token"/);
  });
});

// Bearer tokens from a source asked on every request (the app's is a file
// read again when it changes): a rotated-out token is refused at once.
describe('gateway bearer auth with rotating tokens', () => {
  let h: Harness;
  let tokens: readonly string[] = [ALICE];
  before(async () => {
    h = await startHarness(1, { auth: { mode: 'bearer', tokens: () => tokens } });
  });
  after(() => h?.close());

  it('accepts the tokens the source lists now, and no other', async () => {
    assert.equal((await post(h.url, INITIALIZE, auth(ALICE))).status, 200);
    assert.equal((await post(h.url, INITIALIZE, auth(BOB))).status, 401);
    tokens = [BOB];
    assert.equal((await post(h.url, INITIALIZE, auth(ALICE))).status, 401);
    assert.equal((await post(h.url, INITIALIZE, auth(BOB))).status, 200);
  });

  it('refuses to start with a source that lists no token', () => {
    assert.throws(
      () => createGateway({ schedulers: ['http://127.0.0.1:1'], auth: { mode: 'bearer', tokens: () => [] } }),
      /at least one token/,
    );
  });
});

// A gateway binds a session to its principal only while the session's route is
// in its cache; past that (evicted, expired, another replica without Redis) the
// runtime, which recorded the principal at initialize, refuses another one.
describe('a session bound to its principal past the route cache', () => {
  let h: Harness;
  let other: { gateway: Gateway; server: Server; url: string };
  before(async () => {
    const options = { auth: { mode: 'bearer' as const, tokens: [ALICE, BOB] }, routeCache: { maxEntries: 1 } };
    h = await startHarness(1, options);
    const gateway = createGateway({ schedulers: [h.scheduler.url], upstreamMode: 'direct', ...options });
    other = { gateway, ...(await listen(gateway)) };
  });
  after(async () => {
    await stopServer(other.server);
    await other.gateway.close();
    await h.close();
  });
  const list = { jsonrpc: '2.0', id: 5, method: 'tools/list' };

  it('is 404 for another principal once its route left the cache, and still serves its own', async () => {
    const first = await post(h.url, INITIALIZE, auth(ALICE));
    const session = first.headers.get('mcp-session-id')!;
    // A newer session takes the only cache entry.
    assert.equal((await post(h.url, INITIALIZE, auth(ALICE))).status, 200);
    const bob = await post(h.url, list, { ...auth(BOB), 'mcp-session-id': session });
    assert.equal(bob.status, 404, JSON.stringify(bob.json));
    const alice = await post(h.url, list, { ...auth(ALICE), 'mcp-session-id': session });
    assert.equal(alice.status, 200, JSON.stringify(alice.json));
  });

  it('is 404 for another principal through a gateway that never saw it, and the session lives on', async () => {
    const first = await post(h.url, INITIALIZE, auth(ALICE));
    const session = first.headers.get('mcp-session-id')!;
    const bob = await post(other.url, list, { ...auth(BOB), 'mcp-session-id': session });
    assert.equal(bob.status, 404, JSON.stringify(bob.json));
    // Bob's attempt cached nothing there: Alice reaches her session through either gateway.
    for (const url of [other.url, h.url]) {
      const alice = await post(url, list, { ...auth(ALICE), 'mcp-session-id': session });
      assert.equal(alice.status, 200, JSON.stringify(alice.json));
    }
    const again = await post(other.url, list, { ...auth(BOB), 'mcp-session-id': session });
    assert.equal(again.status, 404, 'refused by the route now cached there as well');
  });

  it("does not refuse the owner's requests while another principal's request is still at the runtime", async () => {
    const first = await post(h.url, INITIALIZE, auth(ALICE));
    const session = first.headers.get('mcp-session-id')!;
    const [runtime] = h.runtimes;
    let release!: () => void;
    runtime!.refusals.until = new Promise((resolve) => (release = resolve));
    try {
      const seen = runtime!.seen.length;
      const bob = post(other.url, list, { ...auth(BOB), 'mcp-session-id': session });
      await until(() => runtime!.seen.length > seen, "Bob's request at the runtime");
      const alice = await post(other.url, list, { ...auth(ALICE), 'mcp-session-id': session });
      assert.equal(alice.status, 200, JSON.stringify(alice.json));
      release();
      assert.equal((await bob).status, 404);
    } finally {
      release();
      delete runtime!.refusals.until;
    }
  });
});
