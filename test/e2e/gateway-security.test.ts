// Acceptance at the process level: the gateway binary started with bearer
// auth, an Origin allow-list and the default body limit, probed with real
// HTTP from outside, then fuzzed. One cluster for the whole file.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { request as httpRequest } from 'node:http';
import { Agent, request } from 'undici';
import { startCluster, type TestCluster } from '../support/cluster.ts';
import { LEGACY, connect, initializeBody, post, textOf, whoami } from './support.ts';

const T1 = 'token-one-0123456789abcdef';
const T2 = 'token-two-0123456789abcdef';
const ORIGIN = 'https://ok.example';
const BODY_BYTES_MAX = 4 * 1024 * 1024;
const FUZZ_REQUESTS = 10_000;
const FUZZ_PARALLEL = 16;

const auth = (token: string): Record<string, string> => ({ authorization: `Bearer ${token}` });

describe('gateway security at the process level', () => {
  let cluster: TestCluster;
  before(async () => {
    cluster = await startCluster({
      gatewayArgs: ['--auth.mode', 'bearer', '--auth.tokens', `${T1},${T2}`, '--allowed-origins', ORIGIN],
      // Two replicas, no Redis: the second knows no session the first opened.
      gateways: 2,
    });
  });
  after(() => cluster?.stop());

  const gates: Array<{ name: string; headers: Record<string, string>; status: number; challenge?: RegExp }> = [
    {
      name: 'refuses a foreign Origin with 403',
      headers: { ...auth(T1), origin: 'https://evil.example' },
      status: 403,
    },
    { name: 'accepts the allowed Origin', headers: { ...auth(T1), origin: ORIGIN }, status: 200 },
    { name: 'accepts a request without Origin', headers: auth(T1), status: 200 },
    {
      name: 'answers 401 with a challenge when the token is missing',
      headers: {},
      status: 401,
      challenge: /^Bearer realm="switchyard"$/,
    },
    {
      name: 'answers 401 with invalid_token for an unknown token',
      headers: auth('token-unknown-0123456789'),
      status: 401,
      challenge: /error="invalid_token"/,
    },
    {
      // RFC 6750 §3.1: another scheme is a method the gateway does not take, not a bad token: no error code.
      name: 'answers 401 with a bare challenge for an Authorization header of another scheme',
      headers: { authorization: `Basic ${T1}` },
      status: 401,
      challenge: /^Bearer realm="switchyard"$/,
    },
  ];
  for (const gate of gates) {
    it(gate.name, async () => {
      const reply = await post(cluster.gatewayUrl(), initializeBody(), gate.headers);
      assert.equal(reply.status, gate.status, reply.text);
      if (gate.challenge) assert.match(reply.headers.get('www-authenticate') ?? '', gate.challenge);
    });
  }

  it("hides one principal's session from another: 404, while its owner keeps using it", async () => {
    const owner = await connect('v2', cluster.gatewayUrl(), auth(T1));
    try {
      const session = (owner as unknown as { transport: { sessionId: string } }).transport.sessionId;
      const call = { jsonrpc: '2.0', id: 3, method: 'tools/call', params: { name: 'whoami', arguments: {} } };
      const intruder = await post(cluster.gatewayUrl(), call, {
        ...auth(T2),
        'mcp-session-id': session,
        'mcp-protocol-version': LEGACY,
      });
      assert.equal(intruder.status, 404, intruder.text);
      assert.equal((await whoami(owner)).class, 'demo');
    } finally {
      await owner.close();
    }
  });

  it("hides it through a gateway replica that never saw it too: the runtime knows the session's principal", async () => {
    const owner = await connect('v2', cluster.gatewayUrl(0), auth(T1));
    try {
      const session = (owner as unknown as { transport: { sessionId: string } }).transport.sessionId;
      const call = { jsonrpc: '2.0', id: 3, method: 'tools/call', params: { name: 'counter', arguments: {} } };
      const headers = { 'mcp-session-id': session, 'mcp-protocol-version': LEGACY };
      const intruder = await post(cluster.gatewayUrl(1), call, { ...auth(T2), ...headers });
      assert.equal(intruder.status, 404, intruder.text);
      const own = await post(cluster.gatewayUrl(1), call, { ...auth(T1), ...headers });
      assert.equal(own.status, 200, own.text);
      assert.match(own.text, /"text":"1"/, "the intruder reached nothing: the first count is the owner's");
    } finally {
      await owner.close();
    }
  });

  it('never lets a client pick its session id nor leaks the token to runtimes', async () => {
    const forged = 'forged-session-id-0001';
    const reply = await post(cluster.gatewayUrl(), initializeBody(), {
      ...auth(T1),
      'x-switchyard-session-id': forged,
      'x-switchyard-principal': 'admin',
    });
    assert.equal(reply.status, 200, reply.text);
    const minted = reply.headers.get('mcp-session-id');
    assert.ok(minted && minted !== forged, `session id ${minted} was minted by the gateway`);

    const client = await connect('v1', cluster.gatewayUrl(), { ...auth(T1), 'x-switchyard-principal': 'admin' });
    try {
      assert.equal(textOf(await client.callTool({ name: 'echo', arguments: { text: 'hi' } })), 'hi');
    } finally {
      await client.close();
    }
    const lines = cluster.runtimes.flatMap((r) => r.logs);
    assert.ok(lines.length > 0, 'the runtimes logged something to look through');
    const runtimeLogs = JSON.stringify(lines);
    for (const secret of [T1, T2]) assert.ok(!runtimeLogs.includes(secret), 'no runtime log line holds a token');
    assert.ok(!runtimeLogs.includes(forged), 'the forged session id never reached a runtime');
  });

  it('answers 413 to a body over the limit and keeps serving', async () => {
    // The gateway answers before reading an oversized body and closes the
    // connection, so a client still writing may see EPIPE after the status:
    // node:http hands over the response as soon as it arrives.
    const status = await new Promise<number>((resolve, reject) => {
      const req = httpRequest(cluster.gatewayUrl(), {
        method: 'POST',
        headers: { ...auth(T1), 'content-type': 'application/json', 'content-length': BODY_BYTES_MAX + 1 },
      });
      req.once('response', (res) => (res.resume(), resolve(res.statusCode ?? 0)));
      req.on('error', reject);
      req.end(Buffer.alloc(BODY_BYTES_MAX + 1, 'x'));
    });
    assert.equal(status, 413);
    assert.equal((await post(cluster.gatewayUrl(), initializeBody(), auth(T1))).status, 200);
  });

  it(`survives ${FUZZ_REQUESTS} fuzzed requests without a 5xx and still answers`, async () => {
    const text = fc.string({ unit: fc.constantFrom(...'abcXYZ019 ._:@-/!{}"\'%\\'.split('')), maxLength: 40 });
    const arb = fc.record({
      method: fc.constantFrom('POST', 'POST', 'POST', 'GET', 'DELETE', 'PUT', 'OPTIONS'),
      path: fc.constantFrom('/mcp', '/mcp', '/mcp/demo/p-fuzz', '/mcp/a/b/c', '/other', '/mcp?x=%zz'),
      token: fc.constantFrom(T1, T1, T2, 'wrong-token-0123456789', undefined),
      version: fc.option(fc.constantFrom(LEGACY, '2026-07-28', '2024-01-01', 'x'), { nil: undefined }),
      session: fc.option(fc.oneof(text, fc.stringMatching(/^[0-9a-f]{32}$/)), { nil: undefined }),
      process: fc.option(text, { nil: undefined }),
      origin: fc.option(fc.constantFrom(ORIGIN, 'https://evil.example', 'null'), { nil: undefined }),
      body: fc.oneof(
        fc.json({ maxDepth: 3 }),
        text,
        fc
          .record({
            jsonrpc: fc.constantFrom('2.0', '1.0'),
            id: fc.oneof(fc.integer(), fc.string({ maxLength: 8 }), fc.constant(null)),
            method: fc.constantFrom('initialize', 'tools/list', 'ping', 'tools/call', 'notifications/initialized', ''),
            params: fc.option(fc.object({ maxDepth: 2 }), { nil: undefined }),
          })
          .map((m) => JSON.stringify(m)),
      ),
    });
    const cases = fc.sample(arb, { numRuns: FUZZ_REQUESTS, seed: 7 });
    const origin = new URL(cluster.gatewayUrl()).origin;
    const dispatcher = new Agent({ connections: FUZZ_PARALLEL });
    const serverErrors: string[] = [];
    const statuses = new Map<number, number>();
    let next = 0;
    try {
      const worker = async (): Promise<void> => {
        while (next < cases.length) {
          const c = cases[next++]!;
          const headers: Record<string, string> = {
            'content-type': 'application/json',
            accept: 'application/json, text/event-stream',
          };
          if (c.token) headers.authorization = `Bearer ${c.token}`;
          if (c.version) headers['mcp-protocol-version'] = c.version;
          if (c.session !== undefined) headers['mcp-session-id'] = c.session;
          if (c.process !== undefined) headers['x-switchyard-process'] = c.process;
          if (c.origin) headers.origin = c.origin;
          const hasBody = c.method === 'POST' || c.method === 'PUT';
          const res = await request(`${origin}${c.path}`, {
            method: c.method as 'POST',
            headers,
            ...(hasBody ? { body: typeof c.body === 'string' ? c.body : JSON.stringify(c.body) } : {}),
            dispatcher,
            // A fuzzed GET may open a real event stream: the status is all this needs.
            signal: AbortSignal.timeout(10_000),
          });
          statuses.set(res.statusCode, (statuses.get(res.statusCode) ?? 0) + 1);
          if (res.statusCode >= 500) serverErrors.push(`${res.statusCode} ${JSON.stringify(c).slice(0, 300)}`);
          // A fuzzed GET may hold a live event stream open: cut it, quietly.
          res.body.on('error', () => undefined);
          res.body.destroy();
        }
      };
      await Promise.all(Array.from({ length: FUZZ_PARALLEL }, worker));
    } finally {
      await dispatcher.close();
    }
    assert.deepEqual(serverErrors.slice(0, 5), [], `5xx statuses: ${JSON.stringify([...statuses])}`);
    const gateway = cluster.gateways[0]!;
    assert.equal(gateway.child.exitCode, null, 'the gateway process is alive');
    assert.equal((await fetch(`${origin}/healthz`)).status, 200);
    assert.equal((await post(cluster.gatewayUrl(), initializeBody(), auth(T1))).status, 200);
  });
});
