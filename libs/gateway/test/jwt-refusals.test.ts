// `refusals_total{reason}` of a gateway in auth mode `jwt`: each way a token
// is refused is counted under its own reason, so that an operator can tell a
// spike of 401s from missing, expired or misaddressed tokens, and 403s from
// a scope every request needs, one a class is held to or one a tool is. Nothing refused is
// scheduled or sent. A real JWKS on loopback, tokens signed by jose.
import { before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { Registry } from 'prom-client';
import { AUDIENCE, ISSUER } from './fixtures/jwks.ts';
import { jwtHarness } from './fixtures/jwt-harness.ts';
import { PREFIX, refusedBy } from './fixtures/refusals.ts';
import { INITIALIZE, post } from './harness.ts';

const bearer = (token: string): Record<string, string> => ({ authorization: `Bearer ${token}` });
const quiet = { upstreamCheckIntervalMs: 0 };

describe('refusals_total of a gateway in auth mode jwt', () => {
  const registry = new Registry();
  const h = jwtHarness(
    {
      issuer: ISSUER,
      audience: AUDIENCE,
      requiredScopes: ['mcp'],
      classScopes: { billing: ['billing'] },
      toolScopes: { counter: ['repo:admin'] },
    },
    { ...quiet, metrics: { registry, prefix: PREFIX } },
  );
  const refused = (headers: Record<string, string>) => refusedBy(registry, h, () => post(h.url, INITIALIZE, headers));
  let good: Record<string, string>;
  before(async () => {
    good = bearer(await h.jwks.signWith({ scope: 'mcp' }));
  });

  it('counts a request without a bearer token, or with another scheme, as no_token', async () => {
    const none = await refused({});
    assert.equal(none.answer.status, 401);
    assert.deepEqual(none.moved, { no_token: 1 });
    const basic = await refused({ authorization: 'Basic dXNlcjpwYXNz' });
    assert.equal(basic.answer.status, 401);
    assert.deepEqual(basic.moved, { no_token: 1 });
    assert.equal(none.scheduled || none.reached || basic.scheduled || basic.reached, false);
  });

  it('counts a token that is not one, or from another issuer, as invalid_token', async () => {
    const garbage = await refused(bearer('not-a-jwt'));
    assert.equal(garbage.answer.status, 401);
    assert.deepEqual(garbage.moved, { invalid_token: 1 });
    const foreign = await refused(bearer(await h.jwks.signWith({ scope: 'mcp', iss: 'https://elsewhere.test' })));
    assert.equal(foreign.answer.status, 401);
    assert.deepEqual(foreign.moved, { invalid_token: 1 });
    assert.equal(garbage.scheduled || garbage.reached || foreign.scheduled || foreign.reached, false);
  });

  it('counts a token past its exp as expired_token', async () => {
    const hourAgo = Math.floor(Date.now() / 1000) - 3600;
    const r = await refused(bearer(await h.jwks.signWith({ scope: 'mcp', iat: hourAgo - 300, exp: hourAgo })));
    assert.equal(r.answer.status, 401);
    assert.deepEqual(r.moved, { expired_token: 1 });
    assert.equal(r.scheduled || r.reached, false);
  });

  it('counts a token for another audience as wrong_audience', async () => {
    const r = await refused(bearer(await h.jwks.signWith({ scope: 'mcp', aud: 'another-service' })));
    assert.equal(r.answer.status, 401);
    assert.deepEqual(r.moved, { wrong_audience: 1 });
    assert.equal(r.scheduled || r.reached, false);
  });

  it('counts a token short of auth.requiredScopes as insufficient_scope', async () => {
    const r = await refused(bearer(await h.jwks.signWith({ scope: 'openid' })));
    assert.equal(r.answer.status, 403);
    assert.deepEqual(r.moved, { insufficient_scope: 1 });
    assert.equal(r.scheduled || r.reached, false);
  });

  it('counts a token short of the scopes of the class that would serve it as class_scope', async () => {
    const r = await refused({ ...good, 'x-switchyard-class': 'billing' });
    assert.equal(r.answer.status, 403);
    assert.deepEqual(r.moved, { class_scope: 1 });
    assert.equal(r.scheduled || r.reached, false);
  });

  it('counts a token short of the scopes of the tool a call names as tool_scope', async () => {
    const modern = { 'mcp-protocol-version': '2026-07-28', 'mcp-method': 'tools/call', 'mcp-name': 'counter' };
    const meta = { 'io.modelcontextprotocol/protocolVersion': '2026-07-28' };
    const counter = { jsonrpc: '2.0', id: 3, method: 'tools/call', params: { name: 'counter', _meta: meta } };
    const r = await refusedBy(registry, h, () => post(h.url, counter, { ...good, ...modern }));
    assert.equal(r.answer.status, 403);
    assert.deepEqual(r.moved, { tool_scope: 1 });
    assert.equal(r.scheduled || r.reached, false);
  });

  it('counts nothing for a token that is good for the request', async () => {
    const r = await refused(good);
    assert.equal(r.answer.status, 200);
    assert.deepEqual(r.moved, {});
  });
});

describe('refusals_total of a gateway in auth mode jwt whose JWKS cannot be fetched', () => {
  const registry = new Registry();
  const h = jwtHarness({ issuer: ISSUER, audience: AUDIENCE }, { ...quiet, metrics: { registry, prefix: PREFIX } });

  it('counts a token it cannot check as jwks_unavailable', async () => {
    h.jwks.answer(503);
    const r = await refusedBy(registry, h, async () => post(h.url, INITIALIZE, bearer(await h.jwks.sign('user-1'))));
    assert.equal(r.answer.status, 503);
    assert.deepEqual(r.moved, { jwks_unavailable: 1 });
    assert.equal(r.scheduled || r.reached, false);
  });
});
