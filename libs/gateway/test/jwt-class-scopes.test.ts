// Auth mode `jwt` with auth.classScopes: a request served by a class listed
// there needs a token that grants that class's scopes, or it is answered 403
// with RFC 6750's insufficient_scope challenge naming them, and goes nowhere.
// The class is the one that serves the request: a legacy session's own
// (what its later requests name does not matter), a stateless request's
// own. A real JWKS on loopback, tokens signed by jose, raw requests and
// real runtimes behind the scheduler double.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { Server } from 'node:http';
import { createGateway, type AuthOptions, type Gateway } from '@switchyard/gateway';
import { AUDIENCE, ISSUER, startJwks, type Jwks } from './fixtures/jwks.ts';
import { jwtHarness } from './fixtures/jwt-harness.ts';
import { INITIALIZE, inSession, openSession, listen, post, startHarness, stopServer, type Harness } from './harness.ts';
import { until } from './until.ts';

const MODERN = '2026-07-28';
const METADATA = 'https://mcp.example.com/.well-known/oauth-protected-resource/mcp';
const CLASS_SCOPES = { 'prod-db': ['db:read', 'db:write'], billing: ['billing'] };
const DB = 'db:read db:write';

const bearer = (token: string): Record<string, string> => ({ authorization: `Bearer ${token}` });
const classed = (cls: string): Record<string, string> => ({ 'x-switchyard-class': cls });
const LIST_TOOLS = { jsonrpc: '2.0', id: 2, method: 'tools/list' };
const MODERN_CALL = {
  jsonrpc: '2.0',
  id: 3,
  method: 'tools/call',
  params: {
    name: 'echo',
    arguments: { text: 'hi' },
    _meta: {
      'io.modelcontextprotocol/protocolVersion': MODERN,
      'io.modelcontextprotocol/clientInfo': { name: 'raw', version: '1' },
      'io.modelcontextprotocol/clientCapabilities': {},
    },
  },
};
const MODERN_HEADERS = { 'mcp-protocol-version': MODERN, 'mcp-method': 'tools/call', 'mcp-name': 'echo' };

/** The challenge of a token short of the scopes `scope`, behind the metadata of the harness below. */
const challenge = (scope: string, cls: string): string =>
  `Bearer realm="switchyard", resource_metadata="${METADATA}", scope="${scope}", ` +
  `error="insufficient_scope", error_description="token lacks a scope of class ${cls}"`;

describe('gateway JWT auth with auth.classScopes', () => {
  const h = jwtHarness({
    issuer: ISSUER,
    audience: AUDIENCE,
    resource: 'https://mcp.example.com/mcp',
    classScopes: CLASS_SCOPES,
  });
  let none: Record<string, string>;
  let db: Record<string, string>;
  before(async () => {
    // One principal (user-1) throughout: only the scopes of its tokens differ.
    none = bearer(await h.jwks.signWith({ scope: 'openid' }));
    db = bearer(await h.jwks.signWith({ scope: 'openid db:read db:write' }));
  });

  /** Runs `send`, and says whether anything of it was scheduled or reached a runtime. */
  async function reached(send: () => Promise<unknown>): Promise<boolean> {
    const [schedules, seen] = [h.gateway.stats().schedules, h.runtimes[0]!.seen.length];
    await send();
    return h.gateway.stats().schedules !== schedules || h.runtimes[0]!.seen.length !== seen;
  }

  it("refuses an initialize to a listed class with a token short of its scopes: 403, the class's challenge, nothing sent", async () => {
    let res: Awaited<ReturnType<typeof post>> | undefined;
    const sent = await reached(async () => (res = await post(h.url, INITIALIZE, { ...none, ...classed('prod-db') })));
    assert.equal(res!.status, 403);
    assert.equal(res!.headers.get('www-authenticate'), challenge(DB, 'prod-db'));
    assert.deepEqual(res!.json, {
      jsonrpc: '2.0',
      id: 1,
      error: {
        code: -32000,
        message: 'Forbidden: token lacks a scope of class prod-db',
        data: { reason: 'forbidden' },
      },
    });
    assert.equal(res!.headers.get('mcp-session-id'), null, 'no session');
    assert.equal(sent, false, 'nothing scheduled or forwarded');
  });

  it('wants every scope of the class, not one of them', async () => {
    const half = bearer(await h.jwks.signWith({ scope: 'db:read' }));
    assert.equal((await post(h.url, INITIALIZE, { ...half, ...classed('prod-db') })).status, 403);
    assert.equal((await post(h.url, INITIALIZE, { ...db, ...classed('prod-db') })).status, 200);
  });

  it('refuses a class named by the path as one named by the header', async () => {
    const url = h.url.replace(/\/mcp$/, '/mcp/prod-db/sandbox-1');
    const res = await post(url, INITIALIZE, none);
    assert.equal(res.status, 403);
    assert.equal(res.headers.get('www-authenticate'), challenge(DB, 'prod-db'));
    assert.equal((await post(url, INITIALIZE, db)).status, 200);
  });

  it('takes any valid token for a class not listed, or none named (the default class)', async () => {
    assert.equal((await post(h.url, INITIALIZE, { ...none, ...classed('demo') })).status, 200);
    assert.equal((await post(h.url, INITIALIZE, none)).status, 200);
  });

  it('holds a stateless request to the scopes of its class', async () => {
    let refused: Awaited<ReturnType<typeof post>> | undefined;
    const headers = { ...MODERN_HEADERS, ...classed('prod-db') };
    const sent = await reached(async () => (refused = await post(h.url, MODERN_CALL, { ...none, ...headers })));
    assert.equal(refused!.status, 403);
    assert.equal(refused!.headers.get('www-authenticate'), challenge(DB, 'prod-db'));
    assert.equal((refused!.json as { id?: unknown }).id, 3);
    assert.equal(sent, false, 'nothing scheduled or forwarded');
    assert.equal((await post(h.url, MODERN_CALL, { ...db, ...headers })).status, 200);
    assert.equal((await post(h.url, MODERN_CALL, { ...none, ...MODERN_HEADERS, ...classed('demo') })).status, 200);
  });

  it("holds every request of a listed class's session to its scopes, whatever class the request names", async () => {
    const id = await openSession(h.url, { ...db, ...classed('prod-db') });
    assert.equal((await post(h.url, LIST_TOOLS, inSession(id, db))).status, 200);
    for (const named of [{}, classed('demo'), classed('prod-db')]) {
      let res: Awaited<ReturnType<typeof post>> | undefined;
      const sent = await reached(
        async () => (res = await post(h.url, LIST_TOOLS, inSession(id, { ...none, ...named }))),
      );
      assert.equal(res!.status, 403, JSON.stringify(named));
      assert.equal(res!.headers.get('www-authenticate'), challenge(DB, 'prod-db'));
      assert.equal((res!.json as { id?: unknown }).id, 2);
      assert.equal(sent, false, `nothing forwarded (${JSON.stringify(named)})`);
    }
    // Its event stream and its end too.
    for (const method of ['GET', 'DELETE']) {
      const res = await fetch(h.url, {
        method,
        headers: { ...inSession(id, { ...none, ...classed('demo') }), accept: 'text/event-stream' },
      });
      assert.equal(res.status, 403, method);
      assert.equal(res.headers.get('www-authenticate'), challenge(DB, 'prod-db'));
      await res.body?.cancel();
    }
    assert.equal((await post(h.url, LIST_TOOLS, inSession(id, db))).status, 200, 'the session lives on');
  });

  it("asserts a listed class's session's own class upstream and to the scheduler, whatever its requests name", async () => {
    const id = await openSession(h.url, { ...db, ...classed('prod-db') });
    // Another replica holds no route for it, so asks the scheduler.
    const auth = { mode: 'jwt' as const, jwksUrl: h.jwks.url, issuer: ISSUER, audience: AUDIENCE };
    const gateway = createGateway({
      schedulers: [h.scheduler.url],
      upstreamMode: 'direct',
      auth: { ...auth, classScopes: CLASS_SCOPES },
    });
    const other = await listen(gateway);
    try {
      const [calls, seen] = [h.scheduler.calls.length, h.runtimes[0]!.seen.length];
      for (const url of [h.url, other.url]) {
        assert.equal((await post(url, LIST_TOOLS, inSession(id, { ...db, ...classed('demo') }))).status, 200);
      }
      const asked = h.scheduler.calls.slice(calls).map((c) => c.class);
      assert.deepEqual(asked, ['prod-db'], 'the scheduler is asked for the session under its class');
      const told = h.runtimes[0]!.seen.slice(seen).map((s) => s.headers['x-switchyard-class']);
      assert.deepEqual(told, ['prod-db', 'prod-db'], "the runtime is told the session's class");
    } finally {
      await stopServer(other.server);
      await gateway.close();
    }
  });

  it("serves a session of a class not listed whatever class its requests name: it stays that class's", async () => {
    const id = await openSession(h.url, { ...none, ...classed('demo') });
    for (const named of [{}, classed('prod-db')]) {
      assert.equal((await post(h.url, LIST_TOOLS, inSession(id, { ...none, ...named }))).status, 200);
    }
  });

  it('gives back what a refused request held: its concurrency slot', async () => {
    await post(h.url, INITIALIZE, { ...none, ...classed('billing') });
    await until(() => h.gateway.stats().inFlight === 0, 'no request in flight');
  });

  it("lists the classes' scopes in the protected resource metadata", async () => {
    const res = await fetch(new URL('/.well-known/oauth-protected-resource/mcp', h.url));
    const { scopes_supported } = (await res.json()) as { scopes_supported?: string[] };
    assert.deepEqual(scopes_supported, ['db:read', 'db:write', 'billing']);
  });
});

// A session opened where classes were not held to scopes (a gateway without
// auth.classScopes, of this version or an earlier one) does not say which
// class it is of: a gateway with them answers it as a lost session (404),
// and its client opens another, which does say.
describe('a session opened by a gateway without auth.classScopes', () => {
  let jwks: Jwks;
  let h: Harness;
  let plain: { gateway: Gateway; server: Server; url: string };
  before(async () => {
    jwks = await startJwks();
    const jwt = { mode: 'jwt' as const, jwksUrl: jwks.url, audience: AUDIENCE };
    h = await startHarness(1, { auth: { ...jwt, classScopes: CLASS_SCOPES } });
    // The same runtime and scheduler, behind another gateway replica.
    const gateway = createGateway({ schedulers: [h.scheduler.url], upstreamMode: 'direct', auth: jwt });
    plain = { gateway, ...(await listen(gateway)) };
  });
  after(async () => {
    if (plain) await stopServer(plain.server);
    await plain?.gateway.close();
    await h?.close();
    await jwks?.close();
  });

  it('is not served to a token short of the scopes of the class it was opened to', async () => {
    const none = bearer(await jwks.signWith({ scope: 'openid' }));
    const id = await openSession(plain.url, { ...none, ...classed('prod-db') });
    const seen = h.runtimes[0]!.seen.length;
    const res = await post(h.url, LIST_TOOLS, inSession(id, { ...none, ...classed('demo') }));
    assert.equal(res.status, 404);
    assert.equal(h.runtimes[0]!.seen.length, seen, 'not forwarded');
  });
});

describe('gateway JWT auth with auth.classScopes and auth.requiredScopes', () => {
  const h = jwtHarness({ audience: AUDIENCE, requiredScopes: ['mcp:tools', 'db:read'], classScopes: CLASS_SCOPES });

  it('names every scope the request needs, those of every request first', async () => {
    const short = bearer(await h.jwks.signWith({ scope: 'mcp:tools db:read' }));
    const res = await post(h.url, INITIALIZE, { ...short, ...classed('prod-db') });
    assert.equal(res.status, 403);
    assert.match(res.headers.get('www-authenticate') ?? '', /, scope="mcp:tools db:read db:write", error=/);
    assert.equal((await post(h.url, INITIALIZE, { ...short, ...classed('demo') })).status, 200);
  });

  it('refuses a token short of auth.requiredScopes first, naming those', async () => {
    const res = await post(h.url, INITIALIZE, {
      ...bearer(await h.jwks.signWith({ scope: 'db:write' })),
      ...classed('prod-db'),
    });
    assert.equal(res.status, 403);
    assert.match(res.headers.get('www-authenticate') ?? '', /, scope="mcp:tools db:read", error=/);
  });
});

describe('auth.classScopes option', () => {
  const jwt = { mode: 'jwt' as const, jwksUrl: 'https://login.example.com/jwks.json' };
  const cases: [string, AuthOptions, RegExp][] = [
    [
      'classes outside mode jwt, whose tokens carry no scopes',
      { mode: 'bearer', tokens: ['token-0123456789abcdef'], classScopes: { 'prod-db': ['db:read'] } },
      /auth\.classScopes needs mode jwt/,
    ],
    [
      'a scope with a quote',
      { ...jwt, classScopes: { 'prod-db': ['a"b'] } },
      /auth\.classScopes\.prod-db: a"b is not a scope token/,
    ],
    [
      'a scope clients are not told to ask for',
      { ...jwt, scopes: ['mcp:tools'], classScopes: { 'prod-db': ['db:read'] } },
      /auth\.classScopes\.prod-db: db:read is not in auth\.scopes/,
    ],
    [
      'a class that lists no scope',
      { ...jwt, classScopes: { 'prod-db': [] } },
      /auth\.classScopes\.prod-db lists no scope/,
    ],
    [
      'a name that is no class',
      { ...jwt, classScopes: { 'prod db': ['db:read'] } },
      /auth\.classScopes: prod db is not a class name/,
    ],
  ];
  for (const [name, options, says] of cases) {
    it(`refuses ${name}`, () => {
      assert.throws(() => createGateway({ schedulers: ['http://127.0.0.1:1'], auth: options }), says);
    });
  }
});
