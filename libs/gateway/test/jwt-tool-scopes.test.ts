// Auth mode `jwt` with auth.toolScopes: a `tools/call` of a tool listed there
// needs a token that grants that tool's scopes, or it is answered 403 with
// RFC 6750's insufficient_scope challenge naming them (MCP authorization's
// step-up), and goes nowhere; other tools, and the session, are untouched.
// The tool is the one the body calls, whatever class the request names: in a
// legacy session, a stateless (2026-07-28) request, or a JSON-RPC batch. A
// real JWKS on loopback, tokens signed by jose, raw requests and a real SDK
// client, real runtimes behind the scheduler double.
import { before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createGateway, type AuthOptions } from '@switchyard/gateway';
import { AUDIENCE, ISSUER } from './fixtures/jwks.ts';
import { jwtHarness, type JwtHarness } from './fixtures/jwt-harness.ts';
import { inSession, openSession, connectV2, post, textOf } from './harness.ts';

const MODERN = '2026-07-28';
const METADATA = 'https://mcp.example.com/.well-known/oauth-protected-resource/mcp';
/** `counter` counts per sandbox: a call that ran shows in the next one's answer. */
const TOOL_SCOPES = { counter: ['repo:admin'], whoami: ['who:read', 'who:write'] };

const bearer = (token: string): Record<string, string> => ({ authorization: `Bearer ${token}` });
const classed = (cls: string): Record<string, string> => ({ 'x-switchyard-class': cls });
const call = (id: number, name: string): Record<string, unknown> => ({
  jsonrpc: '2.0',
  id,
  method: 'tools/call',
  params: { name, arguments: name === 'echo' ? { text: 'hi' } : {} },
});
const modernCall = (id: number, name: string): Record<string, unknown> => {
  const message = call(id, name) as { params: Record<string, unknown> };
  const _meta = {
    'io.modelcontextprotocol/protocolVersion': MODERN,
    'io.modelcontextprotocol/clientInfo': { name: 'raw', version: '1' },
    'io.modelcontextprotocol/clientCapabilities': {},
  };
  return { ...message, params: { ...message.params, _meta } };
};
const modernHeaders = (name: string): Record<string, string> => ({
  'mcp-protocol-version': MODERN,
  'mcp-method': 'tools/call',
  'mcp-name': name,
});

/** The challenge of a token short of the scopes `scope` for `tool`, behind the metadata of the harness below. */
const challenge = (scope: string, tool: string): string =>
  `Bearer realm="switchyard", resource_metadata="${METADATA}", scope="${scope}", ` +
  `error="insufficient_scope", error_description="token lacks a scope of tool ${tool}"`;

/** The text of a tool's result in an answer, JSON or one SSE event. */
function resultOf(answer: { status: number; json: unknown }): string {
  assert.equal(answer.status, 200, JSON.stringify(answer.json));
  const json =
    typeof answer.json === 'string' ? JSON.parse(/^data: (.*)$/m.exec(answer.json)?.[1] ?? 'null') : answer.json;
  return textOf((json as { result?: unknown }).result);
}

/** Runs `send`, and says whether anything of it was scheduled or reached a runtime of `h`. */
async function reached<T>(h: JwtHarness, send: () => Promise<T>): Promise<{ answer: T; sent: boolean }> {
  const [schedules, seen] = [h.gateway.stats().schedules, h.runtimes[0]!.seen.length];
  const answer = await send();
  return { answer, sent: h.gateway.stats().schedules !== schedules || h.runtimes[0]!.seen.length !== seen };
}

describe('gateway JWT auth with auth.toolScopes', () => {
  const h = jwtHarness({
    issuer: ISSUER,
    audience: AUDIENCE,
    resource: 'https://mcp.example.com/mcp',
    toolScopes: TOOL_SCOPES,
  });
  let short: Record<string, string>;
  let admin: Record<string, string>;
  before(async () => {
    // One principal (user-1) throughout: only the scopes of its tokens differ.
    short = bearer(await h.jwks.signWith({ scope: 'openid' }));
    admin = bearer(await h.jwks.signWith({ scope: 'openid repo:admin' }));
  });

  it("lets a token with the tool's scopes call it", async () => {
    const id = await openSession(h.url, admin);
    assert.equal(resultOf(await post(h.url, call(2, 'counter'), inSession(id, admin))), '1');
    assert.equal(resultOf(await post(h.url, call(3, 'counter'), inSession(id, admin))), '2');
  });

  it("refuses a call of a listed tool to a token short of its scopes: 403, the tool's challenge, the request's id, nothing sent", async () => {
    const id = await openSession(h.url, short);
    const { answer, sent } = await reached(h, () => post(h.url, call(7, 'counter'), inSession(id, short)));
    assert.equal(answer.status, 403);
    assert.equal(answer.headers.get('www-authenticate'), challenge('repo:admin', 'counter'));
    assert.deepEqual(answer.json, {
      jsonrpc: '2.0',
      id: 7,
      error: { code: -32000, message: 'Forbidden: token lacks a scope of tool counter', data: { reason: 'forbidden' } },
    });
    assert.equal(sent, false, 'nothing scheduled or forwarded');
    // The session lives on: its other tools for the same token, the listed one for a token with the scope,
    // which finds the counter where the refused call left it, untouched.
    assert.equal(resultOf(await post(h.url, call(8, 'echo'), inSession(id, short))), 'hi');
    assert.equal(resultOf(await post(h.url, call(9, 'counter'), inSession(id, admin))), '1');
  });

  it('wants every scope of the tool, not one of them', async () => {
    const id = await openSession(h.url, short);
    const half = bearer(await h.jwks.signWith({ scope: 'who:read' }));
    const refused = await post(h.url, call(2, 'whoami'), inSession(id, half));
    assert.equal(refused.status, 403);
    assert.equal(refused.headers.get('www-authenticate'), challenge('who:read who:write', 'whoami'));
    const both = bearer(await h.jwks.signWith({ scope: 'who:write who:read' }));
    assert.equal(JSON.parse(resultOf(await post(h.url, call(3, 'whoami'), inSession(id, both)))).runtime, 'rt-0');
  });

  it('refuses a batch with one call of a listed tool whole', async () => {
    const id = await openSession(h.url, short);
    const batch = [call(2, 'echo'), call(3, 'counter')];
    const { answer, sent } = await reached(h, () => post(h.url, batch, inSession(id, short)));
    assert.equal(answer.status, 403);
    assert.equal(answer.headers.get('www-authenticate'), challenge('repo:admin', 'counter'));
    assert.equal((answer.json as { id?: unknown }).id, null, 'a batch has no one id');
    assert.equal(sent, false, 'no call of the batch forwarded');
    // A batch of tools not listed is the runtime's to answer.
    const free = await reached(h, () => post(h.url, [call(4, 'echo')], inSession(id, short)));
    assert.equal(free.sent, true);
  });

  it('names the scopes of every listed tool a batch calls', async () => {
    const id = await openSession(h.url, short);
    const res = await post(h.url, [call(2, 'whoami'), call(3, 'counter')], inSession(id, short));
    assert.equal(res.status, 403);
    assert.match(res.headers.get('www-authenticate') ?? '', /, scope="who:read who:write repo:admin", error=/);
  });

  it('holds a stateless call to the scopes of its tool', async () => {
    const headers = modernHeaders('counter');
    const { answer, sent } = await reached(h, () => post(h.url, modernCall(3, 'counter'), { ...short, ...headers }));
    assert.equal(answer.status, 403);
    assert.equal(answer.headers.get('www-authenticate'), challenge('repo:admin', 'counter'));
    assert.equal((answer.json as { id?: unknown }).id, 3);
    assert.equal(sent, false, 'nothing scheduled or forwarded');
    assert.equal(resultOf(await post(h.url, modernCall(4, 'counter'), { ...admin, ...headers })), '1');
    const echo = await post(h.url, modernCall(5, 'echo'), { ...short, ...modernHeaders('echo') });
    assert.equal(resultOf(echo), 'hi');
  });

  it('holds a call to the scopes of its tool whatever class the request names', async () => {
    const id = await openSession(h.url, { ...short, ...classed('demo') });
    for (const named of [{}, classed('demo'), classed('elsewhere')]) {
      const legacy = await reached(h, () => post(h.url, call(2, 'counter'), inSession(id, { ...short, ...named })));
      assert.equal(legacy.answer.status, 403, JSON.stringify(named));
      assert.equal(legacy.sent, false);
      const headers = { ...short, ...modernHeaders('counter'), ...named };
      const stateless = await reached(h, () => post(h.url, modernCall(3, 'counter'), headers));
      assert.equal(stateless.answer.status, 403, JSON.stringify(named));
      assert.equal(stateless.sent, false);
    }
  });

  it('refuses an SDK client the listed tool, and serves it the others on the same session', async () => {
    const client = await connectV2(h.url, 'legacy', short);
    try {
      // Without an OAuth provider the SDK cannot step up: it fails with the scope the challenge names.
      await assert.rejects(
        client.callTool({ name: 'counter', arguments: {} }),
        /Insufficient scope: required "repo:admin"/,
      );
      assert.equal(textOf(await client.callTool({ name: 'echo', arguments: { text: 'still here' } })), 'still here');
    } finally {
      await client.close();
    }
  });

  it("lists the tools' scopes in the protected resource metadata", async () => {
    const res = await fetch(new URL('/.well-known/oauth-protected-resource/mcp', h.url));
    const { scopes_supported } = (await res.json()) as { scopes_supported?: string[] };
    assert.deepEqual(scopes_supported, ['repo:admin', 'who:read', 'who:write']);
  });
});

describe('gateway JWT auth with auth.toolScopes and auth.requiredScopes', () => {
  const h = jwtHarness({ audience: AUDIENCE, requiredScopes: ['mcp:tools'], toolScopes: TOOL_SCOPES });

  it('names every scope the call needs, those of every request first', async () => {
    const token = bearer(await h.jwks.signWith({ scope: 'mcp:tools' }));
    const res = await post(h.url, modernCall(3, 'counter'), { ...token, ...modernHeaders('counter') });
    assert.equal(res.status, 403);
    assert.match(res.headers.get('www-authenticate') ?? '', /, scope="mcp:tools repo:admin", error=/);
  });
});

describe('gateway JWT auth with auth.toolScopes and auth.classScopes', () => {
  // A call of a listed tool in a class held to scopes needs both: every refusal names them all (RFC 6750
  // §3.1: the scope necessary for the request). A client that asks for just the scopes of the last challenge
  // (the v1 SDK) would otherwise trade the class's for the tool's and back again, one refusal after another.
  const h = jwtHarness({ audience: AUDIENCE, classScopes: { demo: ['demo:use'] }, toolScopes: TOOL_SCOPES });
  const demo = classed('demo');

  it("names the class's scopes with the tool's to a token short of the tool's", async () => {
    const classOnly = bearer(await h.jwks.signWith({ scope: 'demo:use' }));
    const id = await openSession(h.url, { ...classOnly, ...demo });
    const legacy = await reached(h, () => post(h.url, call(2, 'counter'), inSession(id, { ...classOnly, ...demo })));
    assert.equal(legacy.answer.status, 403);
    assert.match(legacy.answer.headers.get('www-authenticate') ?? '', /, scope="demo:use repo:admin", error=/);
    assert.equal(legacy.sent, false);
    const headers = { ...classOnly, ...demo, ...modernHeaders('counter') };
    const stateless = await reached(h, () => post(h.url, modernCall(3, 'counter'), headers));
    assert.equal(stateless.answer.status, 403);
    assert.match(stateless.answer.headers.get('www-authenticate') ?? '', /, scope="demo:use repo:admin", error=/);
    assert.equal(stateless.sent, false);
  });

  it("names the tool's scopes with the class's to a token short of the class's", async () => {
    const classOnly = bearer(await h.jwks.signWith({ scope: 'demo:use' }));
    const toolOnly = bearer(await h.jwks.signWith({ scope: 'repo:admin' }));
    const id = await openSession(h.url, { ...classOnly, ...demo });
    const legacy = await reached(h, () => post(h.url, call(2, 'counter'), inSession(id, { ...toolOnly, ...demo })));
    assert.equal(legacy.answer.status, 403);
    assert.match(legacy.answer.headers.get('www-authenticate') ?? '', /, scope="demo:use repo:admin", error=/);
    assert.equal(legacy.sent, false);
    const headers = { ...toolOnly, ...demo, ...modernHeaders('counter') };
    const stateless = await reached(h, () => post(h.url, modernCall(3, 'counter'), headers));
    assert.equal(stateless.answer.status, 403);
    assert.match(stateless.answer.headers.get('www-authenticate') ?? '', /, scope="demo:use repo:admin", error=/);
    // A tool not listed needs the class's alone.
    const echo = await post(h.url, call(4, 'echo'), inSession(id, { ...toolOnly, ...demo }));
    assert.match(echo.headers.get('www-authenticate') ?? '', /, scope="demo:use", error=/);
  });

  it('serves a token with both', async () => {
    const both = bearer(await h.jwks.signWith({ scope: 'demo:use repo:admin' }));
    const id = await openSession(h.url, { ...both, ...demo });
    assert.equal(resultOf(await post(h.url, call(2, 'counter'), inSession(id, { ...both, ...demo }))), '1');
  });
});

describe('auth.toolScopes option', () => {
  const jwt = { mode: 'jwt' as const, jwksUrl: 'https://login.example.com/jwks.json' };
  const cases: [string, AuthOptions, RegExp][] = [
    [
      'tools outside mode jwt, whose tokens carry no scopes',
      { mode: 'bearer', tokens: ['token-0123456789abcdef'], toolScopes: { delete_repo: ['repo:admin'] } },
      /auth\.toolScopes needs mode jwt/,
    ],
    [
      'a scope with a quote',
      { ...jwt, toolScopes: { delete_repo: ['a"b'] } },
      /auth\.toolScopes\.delete_repo: a"b is not a scope token/,
    ],
    [
      'a scope clients are not told to ask for',
      { ...jwt, scopes: ['mcp:tools'], toolScopes: { delete_repo: ['repo:admin'] } },
      /auth\.toolScopes\.delete_repo: repo:admin is not in auth\.scopes/,
    ],
    [
      'a tool that lists no scope',
      { ...jwt, toolScopes: { delete_repo: [] } },
      /auth\.toolScopes\.delete_repo lists no scope/,
    ],
    ['an empty tool name', { ...jwt, toolScopes: { '': ['repo:admin'] } }, /auth\.toolScopes: a tool name is empty/],
  ];
  for (const [name, options, says] of cases) {
    it(`refuses ${name}`, () => {
      assert.throws(() => createGateway({ schedulers: ['http://127.0.0.1:1'], auth: options }), says);
    });
  }
});
