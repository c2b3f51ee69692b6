// Auth mode `jwt` against a real JWKS on loopback, with tokens signed by
// jose: which tokens give which answer, and which principal travels upstream.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { AUDIENCE, ISSUER, startJwks, type Jwks } from './fixtures/jwks.ts';
import { INITIALIZE, connectV2, post, startHarness, textOf, type Harness } from './harness.ts';

const auth = (token: string): Record<string, string> => ({ authorization: `Bearer ${token}` });

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
