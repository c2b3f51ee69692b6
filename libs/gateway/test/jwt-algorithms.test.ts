// Auth mode `jwt` with auth.algorithms: a token signed with an algorithm
// the list leaves out is refused, though a key the JWKS publishes verifies
// it. A real JWKS on loopback, tokens signed by jose.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createGateway, type AuthOptions } from '@switchyard/gateway';
import { AUDIENCE, ISSUER, startJwks, type Jwks } from './fixtures/jwks.ts';
import { INITIALIZE, post, startHarness, type Harness } from './harness.ts';

const auth = (token: string): Record<string, string> => ({ authorization: `Bearer ${token}` });

describe('gateway JWT auth with auth.algorithms', () => {
  /** Publishes an ES256 key (k1), then an RS256 one (k2), which signs. */
  let jwks: Jwks;
  let es256: string;
  let rs256: string;
  const gateways: Harness[] = [];
  const gatewayFor = async (options: Partial<AuthOptions>): Promise<Harness> => {
    const h = await startHarness(1, {
      auth: { mode: 'jwt', jwksUrl: jwks.url, issuer: ISSUER, audience: AUDIENCE, ...options },
    });
    gateways.push(h);
    return h;
  };
  before(async () => {
    jwks = await startJwks();
    es256 = await jwks.sign('user-es');
    await jwks.rotate(true, 'RS256');
    rs256 = await jwks.sign('user-rs');
  });
  after(async () => {
    await Promise.all(gateways.map((h) => h.close()));
    await jwks?.close();
  });

  it('refuses (401 invalid_token) a token signed with an algorithm it does not list, fetching no keys for it', async () => {
    const h = await gatewayFor({ algorithms: ['ES256'] });
    const fetched = jwks.requests;
    const refused = await post(h.url, INITIALIZE, auth(rs256));
    assert.equal(refused.status, 401);
    assert.match(refused.headers.get('www-authenticate') ?? '', /error="invalid_token"/);
    assert.equal(jwks.requests, fetched, 'refused before any key was looked up');
    assert.equal((await post(h.url, INITIALIZE, auth(es256))).status, 200);
  });

  it('takes a token of an algorithm it lists', async () => {
    const h = await gatewayFor({ algorithms: ['RS256', 'PS256'] });
    assert.equal((await post(h.url, INITIALIZE, auth(rs256))).status, 200);
    assert.equal((await post(h.url, INITIALIZE, auth(es256))).status, 401);
  });

  it('takes by default both RSA and EC signatures', async () => {
    const h = await gatewayFor({});
    assert.equal((await post(h.url, INITIALIZE, auth(rs256))).status, 200);
    assert.equal((await post(h.url, INITIALIZE, auth(es256))).status, 200);
  });
});

describe('auth.algorithms option', () => {
  const jwt = { mode: 'jwt' as const, jwksUrl: 'https://login.example.com/jwks.json' };
  for (const [name, algorithms, says] of [
    ['an empty list', [], /auth\.algorithms must not be empty/],
    ['HS256', ['RS256', 'HS256'], /auth\.algorithms: HS256 is not one of RS256/],
    ['none', ['none'], /auth\.algorithms: none is not one of/],
  ] as const) {
    it(`refuses ${name}`, () => {
      assert.throws(
        () =>
          createGateway({
            schedulers: ['http://127.0.0.1:1'],
            auth: { ...jwt, algorithms: algorithms as unknown as AuthOptions['algorithms'] },
          }),
        says,
      );
    });
  }
});
