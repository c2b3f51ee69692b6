// Auth mode `jwt`: a token's times (`exp`, `nbf`, `iat`) are read on the
// gateway's clock, the one that also ends what an expired token let in. A
// manual clock here, far from the system clock, and a real JWKS on loopback.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { ManualClock } from '@switchyard/clock/testing';
import { AUDIENCE, ISSUER } from './fixtures/jwks.ts';
import { jwtHarness } from './fixtures/jwt-harness.ts';
import { INITIALIZE, post } from './harness.ts';

const auth = (token: string): Record<string, string> => ({ authorization: `Bearer ${token}` });
/** The skew verification allows (GATEWAY_DEFAULTS.jwtClockToleranceMs). */
const TOLERANCE_MS = 60_000;
const WEEK_MS = 7 * 86_400_000;

// Behind the system clock, a check on the system clock finds every token expired;
// ahead of it, it finds none expired, however far the gateway's clock moves.
for (const [name, offsetMs] of [
  ['a week behind', -WEEK_MS],
  ['a week ahead of', WEEK_MS],
] as const) {
  describe(`gateway JWT auth on a gateway clock ${name} the system clock`, () => {
    const clock = new ManualClock(Date.now() + offsetMs);
    const quiet = { upstreamCheckIntervalMs: 0 };
    const h = jwtHarness({ issuer: ISSUER, audience: AUDIENCE }, { ...quiet, clock }, { jwksClock: clock });
    /** The gateway clock's time, in the seconds of a JWT. */
    const now = (): number => Math.floor(clock.now() / 1000);
    /** A token stamped on the gateway's clock (by a provider whose clock agrees), with `claims` over its own. */
    const token = (claims: Record<string, number> = {}): Promise<string> => h.jwks.signWith(claims);
    const statusOf = async (claims?: Record<string, number>): Promise<number> =>
      (await post(h.url, INITIALIZE, auth(await token(claims)))).status;

    it('takes a token valid on its clock, whatever the system clock says', async () => {
      assert.equal(await statusOf(), 200);
    });

    it('refuses a token once its clock is past exp and the tolerance, without the system clock moving', async () => {
      const early = await token();
      const expMs = (now() + 300) * 1000;
      await clock.advance(expMs + TOLERANCE_MS - 1000 - clock.now());
      assert.equal((await post(h.url, INITIALIZE, auth(early))).status, 200, 'within the tolerance');
      await clock.advance(1000);
      const res = await post(h.url, INITIALIZE, auth(early));
      assert.equal(res.status, 401);
      assert.match(
        res.headers.get('www-authenticate') ?? '',
        /error="invalid_token", error_description="token expired"/,
      );
    });

    it('refuses a token valid from later (nbf) than its clock and the tolerance', async () => {
      assert.equal(await statusOf({ nbf: now() + 30 }), 200);
      assert.equal(await statusOf({ nbf: now() + 300 }), 401);
    });

    // RFC 7519 leaves `iat` informational, but a token issued in the future
    // is no token of a provider whose clock agrees with ours: RFC 9068
    // validators (and jose with maxTokenAge) refuse it.
    it('refuses a token issued (iat) later than its clock and the tolerance, saying so', async () => {
      assert.equal(await statusOf({ iat: now() + 30 }), 200, 'within the tolerance');
      const res = await post(h.url, INITIALIZE, auth(await token({ iat: now() + 300, exp: now() + 600 })));
      assert.equal(res.status, 401);
      assert.match(
        res.headers.get('www-authenticate') ?? '',
        /error="invalid_token", error_description="token issued in the future"$/,
      );
    });
  });
}
