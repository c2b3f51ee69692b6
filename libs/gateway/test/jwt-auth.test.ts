// Auth mode `jwt` against a real JWKS on loopback, with tokens signed by
// jose: which tokens give which answer, and which principal travels upstream.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { SignJWT, UnsecuredJWT, base64url, exportSPKI, importJWK, type CryptoKey } from 'jose';
import { ManualClock } from '@switchyard/clock/testing';
import type { AuthOptions } from '@switchyard/gateway';
import { AUDIENCE, ISSUER, startJwks, type Jwks, type JwksAnswer } from './fixtures/jwks.ts';
import { jwtHarness } from './fixtures/jwt-harness.ts';
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
  const h = jwtHarness({ issuer: ISSUER, audience: AUDIENCE });

  const refused: { name: string; token: () => Promise<string> }[] = [
    { name: 'a subject that is a number', token: () => h.jwks.signWith({ sub: 12345 as unknown as string }) },
    { name: 'a subject that is an array', token: () => h.jwks.signWith({ sub: ['user-1'] as unknown as string }) },
    { name: 'an empty subject', token: () => h.jwks.signWith({ sub: '' }) },
    { name: 'no subject', token: () => h.jwks.signWith({ sub: undefined }) },
    { name: 'no expiry (exp)', token: () => h.jwks.signWith({ exp: undefined }) },
    { name: 'another issuer', token: () => h.jwks.signWith({ iss: 'https://elsewhere.test' }) },
    { name: 'another audience', token: () => h.jwks.signWith({ aud: 'other' }) },
    { name: 'alg none', token: async () => new UnsecuredJWT(claims()).encode() },
    { name: 'HS256 keyed with the public JWK', token: () => hmacWithPublicKey(h.jwks, 'jwk') },
    { name: 'HS256 keyed with the public key PEM', token: () => hmacWithPublicKey(h.jwks, 'pem') },
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

  const now = (): number => Math.floor(Date.now() / 1000);
  // A token stamped by an identity provider whose clock runs ahead of the
  // gateway's, or presented in its last second, is not a forgery.
  const skewed: { name: string; claims: () => Record<string, number>; status: number }[] = [
    { name: 'valid from 10 s ahead (nbf)', claims: () => ({ nbf: now() + 10, iat: now() + 10 }), status: 200 },
    { name: 'expired 10 s ago', claims: () => ({ exp: now() - 10, iat: now() - 300 }), status: 200 },
    { name: 'valid from 5 min ahead (nbf)', claims: () => ({ nbf: now() + 300 }), status: 401 },
    { name: 'expired 5 min ago', claims: () => ({ exp: now() - 300, iat: now() - 600 }), status: 401 },
  ];
  for (const c of skewed) {
    it(`answers ${c.status} for a token ${c.name}: a clock tolerance of a minute`, async () => {
      const res = await post(h.url, INITIALIZE, auth(await h.jwks.signWith(c.claims())));
      assert.equal(res.status, c.status);
    });
  }

  // RFC 6750 §3: a refused token gets error="invalid_token" and a description
  // a developer can act on; a request without a token gets neither.
  const challenges: { name: string; headers: () => Promise<Record<string, string>>; params: RegExp }[] = [
    { name: 'no token', headers: async () => ({}), params: /^Bearer realm="switchyard", resource_metadata="[^"]+"$/ },
    {
      name: 'an expired token',
      headers: async () => auth(await h.jwks.signWith({ exp: now() - 600, iat: now() - 900 })),
      params: /, error="invalid_token", error_description="token expired"$/,
    },
    {
      name: 'a token for another audience',
      headers: async () => auth(await h.jwks.signWith({ aud: 'other' })),
      params: /, error="invalid_token", error_description="invalid token"$/,
    },
    {
      name: 'a token without a subject',
      headers: async () => auth(await h.jwks.signWith({ sub: undefined })),
      params: /, error="invalid_token", error_description="token has no subject"$/,
    },
  ];
  for (const c of challenges) {
    it(`challenges ${c.name} as RFC 6750 says`, async () => {
      const res = await post(h.url, INITIALIZE, await c.headers());
      assert.equal(res.status, 401);
      assert.match(res.headers.get('www-authenticate') ?? '', c.params);
    });
  }

  it('forwards a subject unfit for a header or a log line as a label, never as sent', async () => {
    for (const sub of ['user-1\r\nX-Injected: yes', 'x'.repeat(4096), 'ü-user']) {
      const client = await connectV2(h.url, 'legacy', auth(await h.jwks.signWith({ sub })));
      try {
        const who = JSON.parse(textOf(await client.callTool({ name: 'whoami', arguments: {} })));
        assert.match(who.principal, /^sub:[0-9a-f]{24}$/);
      } finally {
        await client.close();
      }
    }
  });

  it('takes no token from the query string: 401 with a challenge that names no error', async () => {
    const res = await post(`${h.url}?access_token=${await h.jwks.sign('user-1')}`, INITIALIZE);
    assert.equal(res.status, 401);
    assert.doesNotMatch(res.headers.get('www-authenticate') ?? '', /error=/);
  });
});

/** A gateway verifying against `jwks`, with these auth options over the defaults (and `clock`, if given); closed by the caller. */
const gatewayFor = (jwks: Jwks, options: Partial<AuthOptions> = {}, clock?: ManualClock): Promise<Harness> =>
  startHarness(1, {
    auth: { mode: 'jwt', jwksUrl: jwks.url, issuer: ISSUER, audience: AUDIENCE, ...options },
    ...(clock ? { clock } : {}),
  });

/** The statuses of `count` requests made one after another, each with the token `token(i)`. */
async function statuses(h: Harness, count: number, token: (i: number) => Promise<string>): Promise<number[]> {
  const out: number[] = [];
  for (let i = 0; i < count; i++) out.push((await post(h.url, INITIALIZE, auth(await token(i)))).status);
  return out;
}

/** Posts with a fresh token from `token` until the answer is `status`; fails after `timeoutMs`. */
async function untilStatus(h: Harness, status: number, token: () => Promise<string>, timeoutMs = 5_000) {
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    const res = await post(h.url, INITIALIZE, auth(await token()));
    if (res.status === status) return;
    assert.ok(performance.now() < deadline, `still ${res.status} after ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

describe('gateway JWT auth through a key rotation', () => {
  let jwks: Jwks;
  before(async () => {
    jwks = await startJwks();
  });
  after(() => jwks.close());

  it('takes a token signed with a new kid after one refetch, and keeps the old key', async () => {
    const h = await gatewayFor(jwks, { jwksCooldownMs: 300 });
    try {
      const old = await jwks.sign('user-1');
      assert.equal((await post(h.url, INITIALIZE, auth(old))).status, 200);
      const before = jwks.requests;
      await jwks.rotate();
      await untilStatus(h, 200, () => jwks.sign('user-2'));
      assert.equal(jwks.requests, before + 1);
      assert.equal((await post(h.url, INITIALIZE, auth(old))).status, 200);
    } finally {
      await h.close();
    }
  });

  // A kid is optional (RFC 7515 §4.1.4): a provider that names none signs with one of the
  // keys it publishes, two of them while it rotates. Each must be tried, not the token refused.
  it('takes a token without a kid from each key of its algorithm, and still refuses a forged one', async () => {
    const h = await gatewayFor(jwks);
    try {
      await jwks.rotate();
      const older = await jwks.signWith({}, { kid: undefined });
      await jwks.rotate();
      const newest = await jwks.signWith({}, { kid: undefined });
      for (const [name, token] of [
        ['the older key', older],
        ['the newest key', newest],
      ] as const) {
        const res = await post(h.url, INITIALIZE, auth(token));
        assert.equal(res.status, 200, `${name}: ${JSON.stringify(res.json)}`);
      }
      const forged = `${newest.split('.').slice(0, 2).join('.')}.${'A'.repeat(86)}`;
      const refused = await post(h.url, INITIALIZE, auth(forged));
      assert.equal(refused.status, 401);
      assert.match(refused.headers.get('www-authenticate') ?? '', /error="invalid_token"/);
    } finally {
      await h.close();
    }
  });

  it('does not fetch the JWKS once per token with a made-up kid', async () => {
    const h = await gatewayFor(jwks);
    try {
      assert.equal((await post(h.url, INITIALIZE, auth(await jwks.sign('user-1')))).status, 200);
      const before = jwks.requests;
      const forged = await Promise.all(
        Array.from({ length: 50 }, async (_, i) => {
          const token = await jwks.signWith({}, { kid: `made-up-${i}` });
          return (await post(h.url, INITIALIZE, auth(token))).status;
        }),
      );
      assert.deepEqual(new Set(forged), new Set([401]));
      assert.equal(jwks.requests, before);
    } finally {
      await h.close();
    }
  });
});

// A key set the gateway cannot fetch is its own failure: 503, never a 401
// that would send the client to sign in again, and never a wait without end.
describe('gateway JWT auth while the JWKS fails', () => {
  /**
   * Runs `test` against a gateway with `options` (and `clock`, if given) and
   * a JWKS of its own, which answers `answer` once the gateway has started.
   */
  async function withJwks(
    answer: JwksAnswer,
    options: Partial<AuthOptions>,
    test: (h: Harness, jwks: Jwks) => Promise<void>,
    clock?: ManualClock,
  ): Promise<void> {
    // Stamped on the gateway's clock, as by a provider whose clock agrees with it.
    const jwks = await startJwks(clock);
    const h = await gatewayFor(jwks, options, clock);
    jwks.answer(answer);
    try {
      await test(h, jwks);
    } finally {
      await h.close();
      await jwks.close();
    }
  }

  it('answers 503 while the JWKS answers an error status', () =>
    withJwks(503, {}, async (h, jwks) => {
      const res = await post(h.url, INITIALIZE, auth(await jwks.sign('user-1')));
      assert.equal(res.status, 503);
      assert.equal(res.headers.get('www-authenticate'), null);
    }));

  it('answers 503 within the fetch timeout while the JWKS does not answer', () =>
    withJwks('hang', {}, async (h, jwks) => {
      const started = performance.now();
      const res = await post(h.url, INITIALIZE, auth(await jwks.sign('user-1')));
      assert.equal(res.status, 503);
      assert.equal(jwks.requests, 1);
      // jose's fetch timeout is 5 s.
      assert.ok(performance.now() - started < 8_000, `answered after ${performance.now() - started} ms`);
    }));

  // The retry interval runs on the gateway's clock: a manual one here, moved past it, not waited for.
  it('asks a JWKS that answers errors once per retry interval, not once per request', () => {
    const clock = new ManualClock();
    return withJwks(
      500,
      { jwksRetryMs: 60_000 },
      async (h, jwks) => {
        assert.deepEqual(new Set(await statuses(h, 20, () => jwks.sign('user-1'))), new Set([503]));
        assert.equal(jwks.requests, 1);
        await clock.advance(59_999);
        assert.equal((await post(h.url, INITIALIZE, auth(await jwks.sign('user-1')))).status, 503);
        assert.equal(jwks.requests, 1, 'not asked again within the interval');
        await clock.advance(1);
        assert.equal((await post(h.url, INITIALIZE, auth(await jwks.sign('user-1')))).status, 503);
        assert.equal(jwks.requests, 2, 'asked again once it has passed');
      },
      clock,
    );
  });

  // Every kid the set lacks is fetched for while the JWKS answers (a cooldown of 1 ms).
  it('verifies with the keys it holds while the JWKS fails, and fetches no more for made-up kids', () =>
    withJwks('keys', { jwksCooldownMs: 1, jwksRetryMs: 60_000 }, async (h, jwks) => {
      assert.equal((await post(h.url, INITIALIZE, auth(await jwks.sign('user-1')))).status, 200);
      jwks.answer(500);
      const forged = await statuses(h, 20, (i) => jwks.signWith({}, { kid: `made-up-${i}` }));
      // The first one's fetch fails (503); the held keys answer the rest.
      assert.deepEqual(forged, [503, ...Array<number>(19).fill(401)]);
      assert.equal(jwks.requests, 2);
      assert.equal((await post(h.url, INITIALIZE, auth(await jwks.sign('user-1')))).status, 200);
    }));

  it('takes tokens again once the JWKS answers again, from the end of its retry interval', () => {
    const clock = new ManualClock();
    return withJwks(
      500,
      { jwksRetryMs: 60_000 },
      async (h, jwks) => {
        assert.equal((await post(h.url, INITIALIZE, auth(await jwks.sign('user-1')))).status, 503);
        jwks.answer('keys');
        assert.equal((await post(h.url, INITIALIZE, auth(await jwks.sign('user-1')))).status, 503, 'still held off');
        await clock.advance(60_000);
        assert.equal((await post(h.url, INITIALIZE, auth(await jwks.sign('user-1')))).status, 200);
      },
      clock,
    );
  });

  it('asks the JWKS again at the end of its retry interval when the wall clock was set back meanwhile', () => {
    const clock = new ManualClock();
    return withJwks(
      500,
      { jwksRetryMs: 60_000 },
      async (h, jwks) => {
        assert.equal((await post(h.url, INITIALIZE, auth(await jwks.sign('user-1')))).status, 503);
        jwks.answer('keys');
        clock.stepWall(-3_600_000); // NTP, or an operator, sets the gateway's clock back an hour
        await clock.advance(60_000);
        assert.equal((await post(h.url, INITIALIZE, auth(await jwks.sign('user-1')))).status, 200, 'not an hour later');
      },
      clock,
    );
  });

  it('says in its log that the JWKS cannot be fetched, naming it and why', async () => {
    const jwks = await startJwks();
    jwks.answer(500);
    const lines: { level: string; fields: Record<string, unknown>; msg?: string }[] = [];
    const log = (level: string) => (fields: object, msg?: string) =>
      void lines.push({ level, fields: fields as Record<string, unknown>, ...(msg !== undefined ? { msg } : {}) });
    const logger = { info: log('info'), warn: log('warn'), error: log('error'), debug: log('debug') };
    const h = await startHarness(1, {
      auth: { mode: 'jwt', jwksUrl: `${jwks.url}?tenant=t1`, issuer: ISSUER, audience: AUDIENCE, jwksRetryMs: 1 },
      logger,
    });
    try {
      await statuses(h, 3, () => jwks.sign('user-1'));
      const errors = lines.filter((l) => l.level === 'error' && /JWKS/.test(l.msg ?? ''));
      // Throttled: one line for three failures in a row.
      assert.equal(errors.length, 1, JSON.stringify(lines));
      assert.equal(errors[0]!.fields.upstream, jwks.url);
      assert.match(String(errors[0]!.fields.err), /200 OK/);
    } finally {
      await h.close();
      await jwks.close();
    }
  });
});
