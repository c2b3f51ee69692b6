// auth.toolScopes across processes: a scheduler, a runtime, and two gateway
// replicas that share no route cache, configured by flags, against a JWKS on
// loopback with tokens signed by jose. `counter` needs `counter:write`; every
// other tool takes any valid token. Whether a refused call reached the
// sandbox is the sandbox's own counter to say.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { AUDIENCE, ISSUER, startJwks, type Jwks } from '../../libs/gateway/test/fixtures/jwks.ts';
import { startCluster, type TestCluster } from '../support/cluster.ts';
import {
  callInSession,
  connect,
  metric,
  modernHeaders,
  post,
  rpcResult,
  sessionOf,
  textOf,
  toolCallBody,
  type AnyClient,
  type RawReply,
} from './support.ts';

const CHALLENGE =
  /^Bearer realm="switchyard", .*scope="counter:write", error="insufficient_scope", error_description="token lacks a scope of tool counter"$/;

const bearer = (token: string): Record<string, string> => ({ authorization: `Bearer ${token}` });

describe('gateways whose counter tool is held to a scope (auth.toolScopes)', () => {
  let jwks: Jwks;
  let cluster: TestCluster;
  /** The same principal's tokens: one without the tool's scope, one with it. */
  let plain: Record<string, string>;
  let writer: Record<string, string>;
  const clients: AnyClient[] = [];
  before(async () => {
    jwks = await startJwks();
    cluster = await startCluster({
      schedulers: 1,
      runtimes: 1,
      gateways: 2,
      gatewayArgs: [
        ...['--auth.mode', 'jwt', '--auth.jwks-url', jwks.url, '--auth.issuer', ISSUER, '--auth.audience', AUDIENCE],
        ...['--auth.tool-scopes', JSON.stringify({ counter: ['counter:write'] })],
      ],
    });
    plain = bearer(await jwks.signWith({ scope: 'openid' }));
    writer = bearer(await jwks.signWith({ scope: 'openid counter:write' }));
  });
  after(async () => {
    await Promise.all(clients.map((c) => c.close().catch(() => undefined)));
    await cluster?.stop();
    await jwks?.close();
  });

  /** A raw `tools/call` of `name` on session `id` through gateway `i`. */
  const callThrough = (i: number, id: string, name: string, headers: Record<string, string>): Promise<RawReply> =>
    callInSession(cluster.gatewayUrl(i), id, name, headers);

  const countOf = (reply: RawReply): number => Number(textOf(rpcResult(reply)));

  it("refuses the tool to a session's token without the scope on either replica, and serves the rest", async () => {
    const session = await connect('v2', cluster.gatewayUrl(0), plain);
    clients.push(session);
    const id = sessionOf(session);
    assert.equal(textOf(await session.callTool({ name: 'echo', arguments: { text: 'hi' } })), 'hi');
    const refusedBefore = await metric(new URL(cluster.gatewayUrl(1)).origin, 'switchyard_gateway_refusals_total', {
      reason: 'tool_scope',
    });
    for (const i of [0, 1]) {
      const refused = await callThrough(i, id, 'counter', plain);
      assert.equal(refused.status, 403, `gateway ${i}`);
      assert.match(refused.headers.get('www-authenticate') ?? '', CHALLENGE);
      assert.equal(JSON.parse(refused.text).id, 7);
    }
    const refusedAfter = await metric(new URL(cluster.gatewayUrl(1)).origin, 'switchyard_gateway_refusals_total', {
      reason: 'tool_scope',
    });
    assert.equal(refusedAfter - refusedBefore, 1, 'the other replica counted its refusal');
    // A token with the scope, on the same session through the other replica: the first count the sandbox gives.
    const taken = await callThrough(1, id, 'counter', writer);
    assert.equal(taken.status, 200, taken.text);
    assert.equal(countOf(taken), 1, 'no refused call reached the sandbox');
    assert.equal((await callThrough(0, id, 'whoami', plain)).status, 200, 'the session serves on');
  });

  it('holds a stateless 2026-07-28 call to the scope', async () => {
    const headers = { ...modernHeaders('tools/call', 'counter'), 'x-switchyard-process': 'p-tool-scopes' };
    const refused = await post(cluster.gatewayUrl(0), toolCallBody(3, 'counter', {}, true), { ...plain, ...headers });
    assert.equal(refused.status, 403);
    assert.match(refused.headers.get('www-authenticate') ?? '', CHALLENGE);
    const modern = await connect('v2-modern', cluster.gatewayUrl(1), {
      ...writer,
      'x-switchyard-process': 'p-tool-scopes',
    });
    clients.push(modern);
    const counted = await modern.callTool({ name: 'counter', arguments: {} });
    assert.equal(Number(textOf(counted)), 1, "the refused call never reached the process's sandbox");
  });
});
