// Auth mode `jwt` with auth.audience a list: a deployment reachable under
// two names, or moving from one audience to another, takes tokens issued
// for any of them, and still serves one resource in its metadata (RFC
// 9728). A real JWKS on loopback, tokens signed by jose.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createGateway, type AuthOptions } from '@switchyard/gateway';
import { ISSUER } from './fixtures/jwks.ts';
import { jwtHarness } from './fixtures/jwt-harness.ts';
import { INITIALIZE, post } from './harness.ts';

const auth = (token: string): Record<string, string> => ({ authorization: `Bearer ${token}` });
const OLD = 'switchyard';
const NEW = 'https://mcp.example.com/mcp';

describe('gateway JWT auth with auth.audience a list', () => {
  const h = jwtHarness({ issuer: ISSUER, audience: [NEW, OLD], resource: NEW });

  it('takes a token for any audience it lists, and refuses one for another', async () => {
    for (const aud of [NEW, OLD, ['https://other.example.com', OLD]]) {
      const res = await post(h.url, INITIALIZE, auth(await h.jwks.signWith({ aud })));
      assert.equal(res.status, 200, `aud ${JSON.stringify(aud)}: ${JSON.stringify(res.json)}`);
    }
    const refused = await post(h.url, INITIALIZE, auth(await h.jwks.signWith({ aud: 'https://other.example.com' })));
    assert.equal(refused.status, 401);
    assert.match(refused.headers.get('www-authenticate') ?? '', /error="invalid_token"/);
  });

  it('serves its one resource in the protected resource metadata', async () => {
    const metadata = `${new URL(h.url).origin}/.well-known/oauth-protected-resource/mcp`;
    const served = (await (await fetch(metadata)).json()) as { resource: unknown };
    assert.equal(served.resource, NEW);
  });
});

describe('auth.audience option', () => {
  const jwt = { mode: 'jwt' as const, jwksUrl: 'https://login.example.com/jwks.json' };
  // Either would let no token in (an empty list) or every audience in (an empty string), silently.
  for (const [name, audience] of [
    ['an empty list', []],
    ['an empty string', ''],
    ['an empty string in a list', [OLD, '']],
  ] as const) {
    it(`refuses ${name}`, () => {
      assert.throws(
        () =>
          createGateway({ schedulers: ['http://127.0.0.1:1'], auth: { ...jwt, audience } as unknown as AuthOptions }),
        /auth\.audience/,
      );
    });
  }
});
