// The gateway app passes its JWT options to the library: a gateway as a
// process, configured by flags, against a JWKS on loopback with tokens
// signed by jose. Its scheduler is never reached, so a token it takes gets
// as far as scheduling (503).
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { AUDIENCE, ISSUER, startJwks, type Jwks } from '../../libs/gateway/test/fixtures/jwks.ts';
import { spawnApp, type AppProcess } from '../support/processes.ts';
import { initializeBody, post, type RawReply } from './support.ts';

/** An `initialize` POST to `gateway` presenting `token`. */
const initializeOn = (gateway: AppProcess, token: string): Promise<RawReply> =>
  post(`http://127.0.0.1:${gateway.port}/mcp`, initializeBody(1, '2025-06-18'), { authorization: `Bearer ${token}` });

describe('a gateway in auth mode jwt, configured by flags', () => {
  let jwks: Jwks;
  let gateway: AppProcess;
  /** Signed with the JWKS's first key, ES256; the tests' other tokens with its RS256 key. */
  let es256: string;
  before(async () => {
    jwks = await startJwks();
    es256 = await jwks.signWith({ client_id: 'billing-agent', scope: 'mcp:tools' });
    await jwks.rotate(true, 'RS256');
    gateway = await spawnApp('gateway', 'gw-jwt-options', [
      ...['--host', '127.0.0.1', '--port', '0', '--schedulers', 'http://127.0.0.1:1'],
      ...['--auth.mode', 'jwt', '--auth.jwks-url', jwks.url, '--auth.issuer', ISSUER, '--auth.audience', AUDIENCE],
      ...['--auth.principal-claim', 'client_id', '--auth.algorithms', 'RS256,PS256'],
      ...['--auth.scopes', 'mcp:tools,offline_access', '--auth.required-scopes', 'mcp:tools'],
    ]);
  });
  after(async () => {
    await gateway?.stop();
    await jwks?.close();
  });

  const initialize = (token: string): Promise<RawReply> => initializeOn(gateway, token);

  it('reads the principal from auth.principalClaim', async () => {
    const lacking = await initialize(await jwks.signWith({ sub: 'service-account-7f3a', scope: 'mcp:tools' }));
    assert.equal(lacking.status, 401);
    assert.match(lacking.headers.get('www-authenticate') ?? '', /error_description="token has no client_id claim"/);
    const taken = await initialize(await jwks.signWith({ client_id: 'billing-agent', scope: 'mcp:tools' }));
    assert.equal(taken.status, 503, 'past authentication, to a scheduler that does not answer');
  });

  it('answers 403 insufficient_scope for a token without auth.requiredScopes', async () => {
    const refused = await initialize(await jwks.signWith({ client_id: 'billing-agent', scope: 'offline_access' }));
    assert.equal(refused.status, 403);
    assert.match(refused.headers.get('www-authenticate') ?? '', /scope="mcp:tools", error="insufficient_scope"/);
  });

  it('refuses a token signed with an algorithm auth.algorithms leaves out', async () => {
    const refused = await initialize(es256);
    assert.equal(refused.status, 401);
    assert.match(refused.headers.get('www-authenticate') ?? '', /error="invalid_token"/);
  });
});

describe('a gateway in auth mode jwt with two audiences and access tokens required, configured by env', () => {
  const OTHER = 'https://mcp.example.com/mcp';
  let jwks: Jwks;
  let gateway: AppProcess;
  before(async () => {
    jwks = await startJwks();
    gateway = await spawnApp(
      'gateway',
      'gw-jwt-audiences',
      ['--host', '127.0.0.1', '--port', '0', '--schedulers', 'http://127.0.0.1:1'],
      {
        env: {
          SWITCHYARD_AUTH_MODE: 'jwt',
          SWITCHYARD_AUTH_JWKS_URL: jwks.url,
          SWITCHYARD_AUTH_ISSUER: ISSUER,
          SWITCHYARD_AUTH_AUDIENCE: `${AUDIENCE},${OTHER}`,
          SWITCHYARD_AUTH_REQUIRE_ACCESS_TOKEN_TYPE: 'true',
        },
      },
    );
  });
  after(async () => {
    await gateway?.stop();
    await jwks?.close();
  });

  it('takes an access token for either audience, and refuses one for another or of another type', async () => {
    for (const aud of [AUDIENCE, OTHER]) {
      const taken = await initializeOn(gateway, await jwks.signWith({ aud }, { typ: 'at+jwt' }));
      assert.equal(taken.status, 503, `aud ${aud}: past authentication, to a scheduler that does not answer`);
    }
    const elsewhere = await initializeOn(gateway, await jwks.signWith({ aud: 'other' }, { typ: 'at+jwt' }));
    assert.equal(elsewhere.status, 401);
    const idToken = await initializeOn(gateway, await jwks.signWith({}, { typ: 'JWT' }));
    assert.equal(idToken.status, 401);
    assert.match(idToken.headers.get('www-authenticate') ?? '', /error_description="token is not an access token/);
  });
});
