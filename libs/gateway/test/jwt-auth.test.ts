// Auth mode `jwt` against a real JWKS on loopback, with tokens signed by
// jose: which tokens give which answer, and which principal travels upstream.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { SignJWT, UnsecuredJWT, base64url, exportSPKI, importJWK, type CryptoKey } from 'jose';
import { AUDIENCE, ISSUER, startJwks, type Jwks } from './fixtures/jwks.ts';
import { INITIALIZE, connectV2, post, startHarness, textOf, type Harness } from './harness.ts';

const auth = (token: string): Record<string, string> => ({ authorization: `Bearer ${token}` });
const claims = () => ({ sub: 'user-1', iss: ISSUER, aud: AUDIENCE, exp: Math.floor(Date.now() / 1000) + 300 });

/** HS256 keyed with what an attacker knows: the published key, as JSON or as PEM. */
async function hmacWithPublicKey(jwks: Jwks, form: 'jwk' | 'pem'): Promise<string> {
  const jwk = jwks.keys[0]!;
  const text = form === 'jwk' ? JSON.stringify(jwk) : await exportSPKI((await importJWK(jwk, 'ES256')) as CryptoKey);
  return new SignJWT(claims()).setProtectedHeader({ alg: 'HS256', kid: jwk.kid! }).sign(new TextEncoder().encode(text));
}

/** A header and claims jose would not sign, with a signature that is not one. */
const unsigned = (header: Record<string, unknown>): string =>
  `${base64url.encode(JSON.stringify(header))}.${base64url.encode(JSON.stringify(claims()))}.AAAA`;

describe('gateway JWT auth: what a token is refused for', () => {
  let h: Harness;
  let jwks: Jwks;
  before(async () => {
    jwks = await startJwks();
    h = await startHarness(1, { auth: { mode: 'jwt', jwksUrl: jwks.url, issuer: ISSUER, audience: AUDIENCE } });
  });
  after(async () => {
    await h.close();
    await jwks.close();
  });

  const refused: { name: string; token: () => Promise<string> }[] = [
    { name: 'a subject that is a number', token: () => jwks.signWith({ sub: 12345 as unknown as string }) },
    { name: 'a subject that is an array', token: () => jwks.signWith({ sub: ['user-1'] as unknown as string }) },
    { name: 'an empty subject', token: () => jwks.signWith({ sub: '' }) },
    { name: 'no subject', token: () => jwks.signWith({ sub: undefined }) },
    { name: 'another issuer', token: () => jwks.signWith({ iss: 'https://elsewhere.test' }) },
    { name: 'another audience', token: () => jwks.signWith({ aud: 'other' }) },
    { name: 'alg none', token: async () => new UnsecuredJWT(claims()).encode() },
    { name: 'HS256 keyed with the public JWK', token: () => hmacWithPublicKey(jwks, 'jwk') },
    { name: 'HS256 keyed with the public key PEM', token: () => hmacWithPublicKey(jwks, 'pem') },
    { name: 'an alg that is no JWS algorithm', token: async () => unsigned({ alg: 'XS999', kid: 'k1' }) },
    { name: 'an alg other than its key', token: async () => unsigned({ alg: 'ES384', kid: 'k1' }) },
    {
      name: 'a critical header it does not know',
      token: async () => unsigned({ alg: 'ES256', kid: 'k1', crit: ['x-new'], 'x-new': 1 }),
    },
  ];
  for (const c of refused) {
    it(`answers 401 invalid_token for a token with ${c.name}`, async () => {
      const res = await post(h.url, INITIALIZE, auth(await c.token()));
      assert.equal(res.status, 401);
      assert.match(res.headers.get('www-authenticate') ?? '', /error="invalid_token"/);
    });
  }

  it('forwards a subject unfit for a header or a log line as a label, never as sent', async () => {
    for (const sub of ['user-1\r\nX-Injected: yes', 'x'.repeat(4096), 'ü-user']) {
      const client = await connectV2(h.url, 'legacy', auth(await jwks.signWith({ sub })));
      try {
        const who = JSON.parse(textOf(await client.callTool({ name: 'whoami', arguments: {} })));
        assert.match(who.principal, /^sub:[0-9a-f]{24}$/);
      } finally {
        await client.close();
      }
    }
  });

  it('takes no token from the query string: 401 with a challenge that names no error', async () => {
    const res = await post(`${h.url}?access_token=${await jwks.sign('user-1')}`, INITIALIZE);
    assert.equal(res.status, 401);
    assert.doesNotMatch(res.headers.get('www-authenticate') ?? '', /error=/);
  });
});

// A key set the gateway cannot fetch is its own failure: 503, never a 401
// that would send the client to sign in again, and never a wait without end.
describe('gateway JWT auth while the JWKS fails', () => {
  let jwks: Jwks;
  let h: Harness;
  before(async () => {
    jwks = await startJwks();
    h = await startHarness(1, { auth: { mode: 'jwt', jwksUrl: jwks.url, issuer: ISSUER, audience: AUDIENCE } });
  });
  after(async () => {
    await h.close();
    await jwks.close();
  });

  it('answers 503 while the JWKS answers an error status', async () => {
    jwks.answer(503);
    const res = await post(h.url, INITIALIZE, auth(await jwks.sign('user-1')));
    assert.equal(res.status, 503);
    assert.equal(res.headers.get('www-authenticate'), null);
  });

  it('answers 503 within the fetch timeout while the JWKS does not answer', async () => {
    jwks.answer('hang');
    const started = Date.now();
    const res = await post(h.url, INITIALIZE, auth(await jwks.sign('user-1')));
    assert.equal(res.status, 503);
    // jose's fetch timeout is 5 s.
    assert.ok(Date.now() - started < 8_000, `answered after ${Date.now() - started} ms`);
  });
});
