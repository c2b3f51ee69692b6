// Auth mode `jwt` with the JWKS served on a port that Node's fetch refuses (6000, 6665-6669, 10080, …: the
// ports browsers block), which is a legitimate place for an identity provider's keys: the gateway must fetch
// them there and accept the tokens they sign. The JWKS is the jwks fixture on the first such port free on
// this machine (with none free, the test is skipped saying so), in front of a real harness of one runtime.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { FETCH_BLOCKED_PORTS, onBlockedPort } from '@switchyard/service/testing';
import { AUDIENCE, ISSUER, startJwks, type Jwks } from './fixtures/jwks.ts';
import { connectV2, startHarness, textOf, type Harness } from './harness.ts';

describe('gateway JWT auth with its JWKS on a port that fetch refuses', () => {
  let jwks: Jwks | undefined;
  let h: Harness | undefined;
  before(async () => {
    jwks = (await onBlockedPort((port) => startJwks(undefined, port)))?.started;
    if (!jwks) return;
    h = await startHarness(1, { auth: { mode: 'jwt', jwksUrl: jwks.url, issuer: ISSUER, audience: AUDIENCE } });
  });
  after(async () => {
    await h?.close();
    await jwks?.close();
  });

  it('fetches the keys there and accepts a token they sign', async (t) => {
    if (!h || !jwks) return void t.skip(`every port of ${FETCH_BLOCKED_PORTS.join(', ')} is taken on this machine`);
    const client = await connectV2(h.url, 'legacy', { authorization: `Bearer ${await jwks.sign('user-1')}` });
    try {
      const whoami = JSON.parse(textOf(await client.callTool({ name: 'whoami', arguments: {} })));
      assert.equal(whoami.principal, 'user-1');
    } finally {
      await client.close();
    }
    assert.equal(jwks.requests, 1);
  });
});
