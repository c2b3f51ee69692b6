// Auth mode `jwt` with auth.requireAccessTokenType: RFC 9068 access tokens
// carry `typ: at+jwt`, which tells them from ID tokens and other JWTs the
// same issuer signs; off by default, as many providers do not set it. A
// real JWKS on loopback, tokens signed by jose.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { AUDIENCE, ISSUER, startJwks, type Jwks } from './fixtures/jwks.ts';
import { INITIALIZE, post, startHarness, type Harness } from './harness.ts';

const auth = (token: string): Record<string, string> => ({ authorization: `Bearer ${token}` });
/** The forms RFC 9068 §4 takes (media types are case-insensitive, `application/` optional). */
const ACCESS_TOKEN_TYPES = ['at+jwt', 'AT+JWT', 'application/at+jwt', 'Application/AT+JWT'];
/** An ID token's type, the generic one, and none. */
const OTHER_TYPES = ['JWT', 'application/jwt', undefined];

describe('gateway JWT auth and the typ header', () => {
  let jwks: Jwks;
  let required: Harness;
  let byDefault: Harness;
  /** The answer to a token whose header says `typ` (none for undefined). */
  const answerTo = async (h: Harness, typ: string | undefined): ReturnType<typeof post> =>
    post(h.url, INITIALIZE, auth(await jwks.signWith({}, { typ })));
  before(async () => {
    jwks = await startJwks();
    const jwt = { mode: 'jwt' as const, jwksUrl: jwks.url, issuer: ISSUER, audience: AUDIENCE };
    required = await startHarness(1, { auth: { ...jwt, requireAccessTokenType: true } });
    byDefault = await startHarness(1, { auth: jwt });
  });
  after(async () => {
    await Promise.all([required?.close(), byDefault?.close()]);
    await jwks?.close();
  });

  it('takes an access token (typ at+jwt) in each form, when required', async () => {
    for (const typ of ACCESS_TOKEN_TYPES) assert.equal((await answerTo(required, typ)).status, 200, typ);
  });

  it('refuses (401 invalid_token) any other typ, or none, when required, saying why', async () => {
    for (const typ of OTHER_TYPES) {
      const res = await answerTo(required, typ);
      assert.equal(res.status, 401, String(typ));
      assert.match(
        res.headers.get('www-authenticate') ?? '',
        /error="invalid_token", error_description="token is not an access token \(typ at\+jwt\)"$/,
      );
    }
  });

  it('takes any typ, or none, by default', async () => {
    for (const typ of [...ACCESS_TOKEN_TYPES, ...OTHER_TYPES]) {
      assert.equal((await answerTo(byDefault, typ)).status, 200, String(typ));
    }
  });
});
