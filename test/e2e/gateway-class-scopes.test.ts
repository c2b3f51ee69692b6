// auth.classScopes across processes: a scheduler, a runtime serving a `demo`
// class anyone may use and a `prod-db` class only tokens with `db:read` may
// reach, and two gateway replicas that share no route cache, configured by
// flags, against a JWKS on loopback with tokens signed by jose. Which class
// serves a session is the runtime's to say (`whoami` names its sandbox's),
// and what a request names does not change it.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { AUDIENCE, ISSUER, startJwks, type Jwks } from '../../libs/gateway/test/fixtures/jwks.ts';
import { startCluster, type TestCluster } from '../support/cluster.ts';
import {
  callInSession,
  MODERN,
  connect,
  counter,
  initializeBody,
  modernHeaders,
  post,
  rpcResult,
  sessionOf,
  textOf,
  toolCallBody,
  whoami,
  type AnyClient,
  type RawReply,
} from './support.ts';

const CLASSES = { demo: { engine: 'builtin' }, 'prod-db': { engine: 'builtin' } };
const CHALLENGE = /^Bearer realm="switchyard", .*scope="db:read", error="insufficient_scope"/;

const bearer = (token: string): Record<string, string> => ({ authorization: `Bearer ${token}` });
const classed = (cls: string): Record<string, string> => ({ 'x-switchyard-class': cls });

describe('a gateway whose prod-db class is held to a scope (auth.classScopes)', () => {
  let jwks: Jwks;
  let cluster: TestCluster;
  /** The same principal's tokens: one without the class's scope, one with it. */
  let plain: Record<string, string>;
  let db: Record<string, string>;
  const clients: AnyClient[] = [];
  before(async () => {
    jwks = await startJwks();
    cluster = await startCluster({
      schedulers: 1,
      runtimes: 1,
      gateways: 2,
      runtimeArgs: ['--classes', JSON.stringify(CLASSES)],
      gatewayArgs: [
        ...['--auth.mode', 'jwt', '--auth.jwks-url', jwks.url, '--auth.issuer', ISSUER, '--auth.audience', AUDIENCE],
        ...['--auth.class-scopes', JSON.stringify({ 'prod-db': ['db:read'] })],
      ],
    });
    plain = bearer(await jwks.signWith({ scope: 'openid' }));
    db = bearer(await jwks.signWith({ scope: 'openid db:read' }));
  });
  after(async () => {
    await Promise.all(clients.map((c) => c.close().catch(() => undefined)));
    await cluster?.stop();
    await jwks?.close();
  });

  /** A client connected through gateway `i`, closed after the suite. */
  const connected = async (
    generation: 'v2' | 'v2-modern',
    i: number,
    headers: Record<string, string>,
  ): Promise<AnyClient> => {
    const client = await connect(generation, cluster.gatewayUrl(i), headers);
    clients.push(client);
    return client;
  };

  /** A raw `tools/call` of `name` on session `id` through gateway `i`. */
  const callThrough = (i: number, id: string, name: string, headers: Record<string, string>): Promise<RawReply> =>
    callInSession(cluster.gatewayUrl(i), id, name, headers);

  it('refuses a token without the scope 403, with the challenge naming it, and opens no session', async () => {
    const refused = await post(cluster.gatewayUrl(), initializeBody(1), { ...plain, ...classed('prod-db') });
    assert.equal(refused.status, 403);
    assert.match(refused.headers.get('www-authenticate') ?? '', CHALLENGE);
    assert.equal(refused.headers.get('mcp-session-id'), null);
    assert.deepEqual(JSON.parse(refused.text).error.data, { reason: 'forbidden' });
    const modern = await connected('v2-modern', 0, plain);
    assert.equal(textOf(await modern.callTool({ name: 'echo', arguments: { text: 'demo' } })), 'demo', 'demo is open');
  });

  it('serves a token with the scope, in a session and statelessly', async () => {
    const session = await connected('v2', 0, { ...db, ...classed('prod-db') });
    assert.equal((await whoami(session)).class, 'prod-db');
    const modern = await connected('v2-modern', 0, { ...db, ...classed('prod-db') });
    assert.equal((await whoami(modern)).class, 'prod-db');
    const refused = await post(cluster.gatewayUrl(), toolCallBody(3, 'whoami', {}, true), {
      ...plain,
      ...classed('prod-db'),
      ...modernHeaders('tools/call', 'whoami'),
    });
    assert.equal(refused.status, 403, 'a stateless request of the class, without the scope');
    assert.match(refused.headers.get('www-authenticate') ?? '', CHALLENGE);
  });

  it('holds a prod-db session to the scope whatever class a request names, on either replica', async () => {
    const session = await connected('v2', 0, { ...db, ...classed('prod-db') });
    const id = sessionOf(session);
    assert.equal(await counter(session), 1);
    for (const i of [0, 1]) {
      for (const named of [{}, classed('demo')]) {
        const refused = await callThrough(i, id, 'counter', { ...plain, ...named });
        assert.equal(refused.status, 403, `gateway ${i}, ${JSON.stringify(named)}`);
        assert.match(refused.headers.get('www-authenticate') ?? '', CHALLENGE);
      }
    }
    assert.equal(await counter(session), 2, 'no refused call reached the sandbox');
    const taken = await callThrough(1, id, 'whoami', db);
    assert.equal(taken.status, 200, 'the other replica serves it to a token with the scope');
  });

  it("lets no request the gateway takes for stateless reach a prod-db session's sandbox without the scope", async () => {
    // The gateway checks a stateless request against the class it names; what keeps such a request that
    // carries a prod-db session's id out of that session is the runtime's (its SDK's) refusal to take a
    // 2026-07-28 request, or a batch claiming it, in a legacy session.
    const session = await connected('v2', 0, { ...db, ...classed('prod-db') });
    const id = sessionOf(session);
    const before = await counter(session);
    const sneaking = { ...plain, ...classed('demo'), 'mcp-session-id': id };
    const modern = await post(cluster.gatewayUrl(), toolCallBody(4, 'counter', {}, true), {
      ...sneaking,
      ...modernHeaders('tools/call', 'counter'),
    });
    assert.notEqual(modern.status, 200, modern.text);
    const batch = await post(cluster.gatewayUrl(), [toolCallBody(5, 'counter', {}, true)], {
      ...sneaking,
      'mcp-protocol-version': MODERN,
    });
    assert.notEqual(batch.status, 200, batch.text);
    assert.equal(await counter(session), before + 1, 'neither reached the sandbox');
  });

  it('keeps a demo session in demo whatever class its requests name', async () => {
    const session = await connected('v2', 0, { ...plain, ...classed('demo') });
    const id = sessionOf(session);
    for (const i of [0, 1]) {
      const steered = await callThrough(i, id, 'whoami', { ...plain, ...classed('prod-db') });
      assert.equal(steered.status, 200, `gateway ${i}`);
      const who = JSON.parse(textOf(rpcResult(steered))) as { class: string };
      assert.equal(who.class, 'demo', `gateway ${i}`);
    }
  });
});
