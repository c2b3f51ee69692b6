// Auth mode `jwt` with auth.principalClaim: the principal is read from the
// claim configured (a client-credential token's `client_id`, say), against a
// real JWKS on loopback with tokens signed by jose.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createGateway } from '@switchyard/gateway';
import { AUDIENCE, ISSUER, startJwks, type Jwks } from './fixtures/jwks.ts';
import { INITIALIZE, connectV2, post, startHarness, textOf, type Harness } from './harness.ts';

const auth = (token: string): Record<string, string> => ({ authorization: `Bearer ${token}` });

/** The principal the runtime saw for a session opened with `token`. */
async function principalOf(h: Harness, token: string): Promise<string> {
  const client = await connectV2(h.url, 'legacy', auth(token));
  try {
    return JSON.parse(textOf(await client.callTool({ name: 'whoami', arguments: {} }))).principal;
  } finally {
    await client.close();
  }
}

describe('gateway JWT auth with auth.principalClaim', () => {
  let jwks: Jwks;
  let byClient: Harness;
  let byUrlClaim: Harness;
  before(async () => {
    jwks = await startJwks();
    const jwt = { mode: 'jwt' as const, jwksUrl: jwks.url, issuer: ISSUER, audience: AUDIENCE };
    byClient = await startHarness(1, { auth: { ...jwt, principalClaim: 'client_id' } });
    byUrlClaim = await startHarness(1, { auth: { ...jwt, principalClaim: 'https://example.com/uid' } });
  });
  after(async () => {
    await Promise.all([byClient?.close(), byUrlClaim?.close()]);
    await jwks?.close();
  });

  it('forwards the claim configured as the principal, not the subject', async () => {
    // A client-credential token: its `sub` names a service account, its `client_id` the agent.
    const token = await jwks.signWith({ sub: 'service-account-7f3a', client_id: 'billing-agent' });
    assert.equal(await principalOf(byClient, token), 'billing-agent');
    const namespaced = await jwks.signWith({ 'https://example.com/uid': 'u-42' });
    assert.equal(await principalOf(byUrlClaim, namespaced), 'u-42');
  });

  it('answers 401 invalid_token, naming the claim, for a token without it', async () => {
    const res = await post(byClient.url, INITIALIZE, auth(await jwks.signWith({ sub: 'service-account-7f3a' })));
    assert.equal(res.status, 401);
    assert.match(
      res.headers.get('www-authenticate') ?? '',
      /, error="invalid_token", error_description="token has no client_id claim"$/,
    );
    assert.deepEqual((res.json as { error: { code: number } }).error.code, -32001);
  });

  for (const [name, value] of [
    ['a number', 12345],
    ['an array', ['billing-agent']],
    ['an empty string', ''],
  ] as const) {
    it(`answers 401 for a token whose claim is ${name}, even with a subject`, async () => {
      const token = await jwks.signWith({ sub: 'service-account-7f3a', client_id: value as unknown as string });
      assert.equal((await post(byClient.url, INITIALIZE, auth(token))).status, 401);
    });
  }

  it('forwards a value unfit for a header as a label named after the claim, or `claim` when its name is unfit', async () => {
    const unfit = 'billing agent\r\nX-Injected: yes';
    assert.match(await principalOf(byClient, await jwks.signWith({ client_id: unfit })), /^client_id:[0-9a-f]{24}$/);
    assert.match(
      await principalOf(byUrlClaim, await jwks.signWith({ 'https://example.com/uid': unfit })),
      /^claim:[0-9a-f]{24}$/,
    );
  });

  // A claim its holder may set (a display name) must not let one user take the label another's value travels as.
  it('labels a value shaped like a label, so it never passes for the label of another value', async () => {
    const h = await startHarness(1, {
      auth: { mode: 'jwt', jwksUrl: jwks.url, issuer: ISSUER, audience: AUDIENCE, principalClaim: 'name' },
    });
    try {
      const alice = await principalOf(h, await jwks.signWith({ name: 'Alice Smith' }));
      assert.match(alice, /^name:[0-9a-f]{24}$/);
      const mallory = await principalOf(h, await jwks.signWith({ name: alice }));
      assert.notEqual(mallory, alice);
      assert.match(mallory, /^name:[0-9a-f]{24}$/);
      // Another claim's label form passes as it is.
      assert.equal(
        await principalOf(h, await jwks.signWith({ name: `sub:${alice.slice(5)}` })),
        `sub:${alice.slice(5)}`,
      );
    } finally {
      await h.close();
    }
  });
});

describe('auth.principalClaim option', () => {
  const jwt = { mode: 'jwt' as const, jwksUrl: 'https://login.example.com/jwks.json' };
  for (const claim of ['', 'client id', 'a"b', 'a\\b', 'ü', 'x'.repeat(257)]) {
    it(`refuses ${JSON.stringify(claim.length > 20 ? `${claim.slice(0, 5)}…` : claim)}`, () => {
      assert.throws(
        () => createGateway({ schedulers: ['http://127.0.0.1:1'], auth: { ...jwt, principalClaim: claim } }),
        /auth\.principalClaim must be a claim name/,
      );
    });
  }
});
