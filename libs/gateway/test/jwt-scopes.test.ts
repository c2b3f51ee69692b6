// Auth mode `jwt` with auth.requiredScopes: a valid token that lacks one is
// answered 403 with RFC 6750's insufficient_scope challenge, which MCP
// clients step up from (MCP authorization, "Scope Challenge Handling"),
// not a 401 that would send them to sign in again. A real JWKS on
// loopback, tokens signed by jose, raw requests and SDK clients.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { InsufficientScopeError, UnauthorizedError } from '@modelcontextprotocol/client';
import { Client as ClientV1 } from '@modelcontextprotocol/sdk/client/index.js';
import {
  StreamableHTTPClientTransport as TransportV1,
  StreamableHTTPError,
} from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { createGateway, type AuthOptions } from '@switchyard/gateway';
import { AUDIENCE, ISSUER, startJwks, type Jwks } from './fixtures/jwks.ts';
import { jwtHarness } from './fixtures/jwt-harness.ts';
import { INITIALIZE, connectV2, post, startHarness, textOf, type Harness } from './harness.ts';

const auth = (token: string): Record<string, string> => ({ authorization: `Bearer ${token}` });
const METADATA = 'https://mcp.example.com/.well-known/oauth-protected-resource/mcp';

describe('gateway JWT auth with auth.requiredScopes', () => {
  let jwks: Jwks;
  /** Requires mcp:tools; clients are told to ask for it and offline_access. */
  let h: Harness;
  /** Requires two scopes, with no protected resource metadata (no authorization server known). */
  let bare: Harness;
  before(async () => {
    jwks = await startJwks();
    const jwt = { mode: 'jwt' as const, jwksUrl: jwks.url, audience: AUDIENCE };
    h = await startHarness(1, {
      auth: {
        ...jwt,
        issuer: ISSUER,
        resource: 'https://mcp.example.com/mcp',
        scopes: ['mcp:tools', 'offline_access'],
        requiredScopes: ['mcp:tools'],
      },
    });
    bare = await startHarness(1, { auth: { ...jwt, requiredScopes: ['mcp:tools', 'mcp:admin'] } });
  });
  after(async () => {
    await Promise.all([h?.close(), bare?.close()]);
    await jwks?.close();
  });

  it('answers 403 insufficient_scope, naming the scopes required and the metadata, with a JSON-RPC error', async () => {
    const res = await post(h.url, INITIALIZE, auth(await jwks.signWith({ scope: 'openid offline_access' })));
    assert.equal(res.status, 403);
    assert.equal(
      res.headers.get('www-authenticate'),
      `Bearer realm="switchyard", resource_metadata="${METADATA}", scope="mcp:tools", ` +
        'error="insufficient_scope", error_description="token lacks a required scope"',
    );
    assert.deepEqual(res.json, {
      jsonrpc: '2.0',
      id: null,
      error: { code: -32000, message: 'Forbidden: token lacks a required scope', data: { reason: 'forbidden' } },
    });
  });

  it('names every scope required, without protected resource metadata too', async () => {
    const res = await post(bare.url, INITIALIZE, auth(await jwks.signWith({ scope: 'mcp:tools' })));
    assert.equal(res.status, 403);
    assert.equal(
      res.headers.get('www-authenticate'),
      'Bearer realm="switchyard", scope="mcp:tools mcp:admin", error="insufficient_scope", ' +
        'error_description="token lacks a required scope"',
    );
    const both = await post(bare.url, INITIALIZE, auth(await jwks.signWith({ scope: 'mcp:admin mcp:tools' })));
    assert.equal(both.status, 200);
  });

  it('names the scopes required in a 401 without protected resource metadata', async () => {
    const none = await post(bare.url, INITIALIZE);
    assert.equal(none.status, 401);
    assert.equal(none.headers.get('www-authenticate'), 'Bearer realm="switchyard", scope="mcp:tools mcp:admin"');
    const invalid = await post(bare.url, INITIALIZE, auth('not-a-jwt'));
    assert.equal(invalid.status, 401);
    assert.match(
      invalid.headers.get('www-authenticate') ?? '',
      /^Bearer realm="switchyard", scope="mcp:tools mcp:admin", error="invalid_token"/,
    );
  });

  // RFC 9068 and RFC 8693: `scope`, space-separated; Microsoft Entra ID: `scp`,
  // space-separated; Okta: `scp`, an array. Scopes are case-sensitive (RFC 6749 §3.3).
  const grants: { name: string; claims: Record<string, unknown>; status: number }[] = [
    { name: 'a scope claim that lists it', claims: { scope: 'openid mcp:tools' }, status: 200 },
    { name: 'a space-separated scp claim (Entra ID)', claims: { scp: 'mcp:tools openid' }, status: 200 },
    { name: 'an scp array (Okta)', claims: { scp: ['openid', 'mcp:tools'] }, status: 200 },
    { name: 'no scope claim', claims: {}, status: 403 },
    { name: 'an empty scope', claims: { scope: '' }, status: 403 },
    { name: 'a scope that only starts with it', claims: { scope: 'mcp:tools:read' }, status: 403 },
    { name: 'it in other case', claims: { scope: 'MCP:TOOLS' }, status: 403 },
    { name: 'a scope claim that is no string or list', claims: { scope: { 'mcp:tools': true } }, status: 403 },
    {
      name: 'it in scp only, beside a scope claim without it',
      claims: { scope: 'openid', scp: 'mcp:tools' },
      status: 403,
    },
  ];
  for (const c of grants) {
    it(`answers ${c.status} for a token with ${c.name}`, async () => {
      assert.equal((await post(h.url, INITIALIZE, auth(await jwks.signWith(c.claims)))).status, c.status);
    });
  }

  it('answers 401, not 403, for an invalid token that lacks the scope too', async () => {
    const res = await post(h.url, INITIALIZE, auth(await jwks.signWith({ aud: 'other', scope: 'openid' })));
    assert.equal(res.status, 401);
    assert.match(res.headers.get('www-authenticate') ?? '', /error="invalid_token"/);
  });

  it('has an SDK client told the scope to step up to (InsufficientScopeError), not to sign in again', async () => {
    for (const mode of ['legacy', 'modern'] as const) {
      const error = await connectV2(h.url, mode, auth(await jwks.signWith({ scope: 'openid' }))).then(
        () => assert.fail(`${mode}: connected without the scope`),
        (e: unknown) => e,
      );
      assert.ok(error instanceof InsufficientScopeError, `${mode}: ${String(error)}`);
      assert.ok(!(error instanceof UnauthorizedError), mode);
      assert.equal(error.requiredScope, 'mcp:tools', mode);
      const client = await connectV2(h.url, mode, auth(await jwks.signWith({ scope: 'openid mcp:tools' })));
      try {
        assert.equal(textOf(await client.callTool({ name: 'echo', arguments: { text: 'hi' } })), 'hi');
      } finally {
        await client.close();
      }
    }
  });

  // v1 steps up only with an auth provider; without one it fails the request on the 403.
  it('has a v1 SDK client fail with the 403, not as unauthorized', async () => {
    const client = new ClientV1({ name: 'v1', version: '1.0.0' });
    const transport = new TransportV1(new URL(h.url), {
      requestInit: { headers: auth(await jwks.signWith({ scope: 'openid' })) },
    });
    const error = await client.connect(transport).then(
      () => assert.fail('connected without the scope'),
      (e: unknown) => e,
    );
    await client.close();
    assert.ok(error instanceof StreamableHTTPError, String(error));
    assert.equal(error.code, 403);
  });
});

// auth.scopes is what clients are told to ask for, and may name scopes an
// access token does not carry (offline_access, openid): it is not enforced.
describe('gateway JWT auth with auth.scopes alone', () => {
  const h = jwtHarness({ issuer: ISSUER, audience: AUDIENCE, scopes: ['mcp:tools'] });

  it('takes a token without those scopes', async () => {
    assert.equal((await post(h.url, INITIALIZE, auth(await h.jwks.signWith({ scope: 'openid' })))).status, 200);
  });
});

describe('gateway JWT auth with auth.requiredScopes alone', () => {
  const h = jwtHarness({ issuer: ISSUER, audience: AUDIENCE, requiredScopes: ['mcp:tools'] });

  it('tells clients to ask for the scopes it requires, in the 401 challenge and the metadata', async () => {
    const res = await post(h.url, INITIALIZE);
    assert.equal(res.status, 401);
    assert.match(res.headers.get('www-authenticate') ?? '', /, scope="mcp:tools"$/);
    const metadata = await fetch(new URL('/.well-known/oauth-protected-resource/mcp', h.url));
    assert.deepEqual(((await metadata.json()) as { scopes_supported?: string[] }).scopes_supported, ['mcp:tools']);
  });
});

// Microsoft Entra ID: delegated tokens carry `scp`, application
// (client-credential) tokens `roles`, a list; auth.scopeClaims names both.
describe('gateway JWT auth with auth.scopeClaims', () => {
  const h = jwtHarness({ audience: AUDIENCE, requiredScopes: ['Tools.Use'], scopeClaims: ['scp', 'roles'] });

  const grants: { name: string; claims: Record<string, unknown>; status: number }[] = [
    { name: 'it in scp (a delegated token)', claims: { scp: 'User.Read Tools.Use' }, status: 200 },
    { name: 'it in roles (an application token)', claims: { roles: ['Tools.Use'] }, status: 200 },
    { name: 'roles without it', claims: { roles: ['Tools.Read'] }, status: 403 },
    { name: 'it in scope only, a claim not listed', claims: { scope: 'Tools.Use' }, status: 403 },
    {
      name: 'it in roles, beside an scp without it (the first claim carried)',
      claims: { scp: 'User.Read', roles: ['Tools.Use'] },
      status: 403,
    },
  ];
  for (const c of grants) {
    it(`answers ${c.status} for a token with ${c.name}`, async () => {
      assert.equal((await post(h.url, INITIALIZE, auth(await h.jwks.signWith(c.claims)))).status, c.status);
    });
  }
});

describe('auth.requiredScopes option', () => {
  const jwt = { mode: 'jwt' as const, jwksUrl: 'https://login.example.com/jwks.json' };
  const cases: [string, AuthOptions, RegExp][] = [
    ['a scope with a quote', { ...jwt, requiredScopes: ['a"b'] }, /auth\.requiredScopes: a"b is not a scope token/],
    [
      'a scope clients are not told to ask for',
      { ...jwt, scopes: ['mcp:tools'], requiredScopes: ['mcp:admin'] },
      /auth\.requiredScopes: mcp:admin is not in auth\.scopes/,
    ],
    [
      'scopes outside mode jwt, which has no scopes to check',
      { mode: 'bearer', tokens: ['token-0123456789abcdef'], requiredScopes: ['mcp:tools'] },
      /auth\.requiredScopes needs mode jwt/,
    ],
    ['no scope claims', { ...jwt, scopeClaims: [] }, /auth\.scopeClaims must not be empty/],
    [
      'a scope claim that is no claim name',
      { ...jwt, scopeClaims: ['my scopes'] },
      /auth\.scopeClaims: my scopes is not a claim name/,
    ],
  ];
  for (const [name, options, says] of cases) {
    it(`refuses ${name}`, () => {
      assert.throws(() => createGateway({ schedulers: ['http://127.0.0.1:1'], auth: options }), says);
    });
  }
});
