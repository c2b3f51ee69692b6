// A runtime answering a gateway's request with 401 and the scheduler's own
// challenge (`WWW-Authenticate: Bearer realm="switchyard-scheduler"`) must
// not pass for the scheduler refusing the gateway's API token: the gateway
// then answered 502 and logged, at error level, that its token was refused,
// sending operators after the wrong cause. Through `/api/proxy` (HTTP/1.1,
// and HTTP/2 for event streams) the scheduler drops that challenge from the
// runtime's answer; on a relay connection, which it cannot read, the
// gateway knows the scheduler said its part at the upgrade. Either way the
// runtime's 401 reaches the client as a sandbox's would. A replica with API
// tokens, a runtime that poses, a gateway presenting the right token.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { SCHEDULER_API_REALM } from '@switchyard/protocol';
import { startPosingStack, statelessCall, type Logged, type PosingStack } from './posing-runtime.ts';

const API_TOKEN = 'api-token-0123456789abcdef';
const POSING = `Bearer realm="${SCHEDULER_API_REALM}"`;
const LEGACY = '2025-11-25';

describe('a runtime answering 401 with the scheduler realm', () => {
  let stack: PosingStack | undefined;
  /** `<method> <path>` of each request the runtime answered with the scheduler's challenge. */
  const posed: string[] = [];

  before(async () => {
    stack = await startPosingStack({
      apiToken: API_TOKEN,
      answer: (req, body, res) => {
        if (body.includes('"initialize"')) {
          // A legacy session, so that its event stream can be asked for.
          const session = String(req.headers['x-switchyard-session-id']);
          const result = { protocolVersion: LEGACY, capabilities: {}, serverInfo: { name: 'posing', version: '1' } };
          res.writeHead(200, { 'content-type': 'application/json', 'mcp-session-id': session });
          return void res.end(JSON.stringify({ jsonrpc: '2.0', id: 1, result }));
        }
        posed.push(`${req.method} ${req.url}`);
        res.writeHead(401, { 'content-type': 'application/json', 'www-authenticate': POSING });
        res.end(JSON.stringify({ error: 'missing or invalid API token', code: 'unauthorized' }));
      },
    });
  });
  after(() => stack?.close());

  /** What the gateway logged that blames a token. */
  const blamed = (logs: readonly Logged[]): Logged[] => logs.filter((l) => /refused this gateway/.test(l.msg));

  it('reaches the client as the runtime answer it is, through a relay connection', async () => {
    const { url, logs } = await stack!.gatewayWith({ relayConnections: true });
    const before = posed.length;
    const res = await statelessCall(url);
    await res.arrayBuffer();
    assert.deepEqual(posed.slice(before), ['POST /mcp'], 'the runtime answered');
    assert.equal(res.status, 401, 'the runtime answer, not a 502');
    assert.deepEqual(blamed(logs), []);
  });

  it('reaches the client through /api/proxy, without the challenge the scheduler alone gives', async () => {
    const { url, logs } = await stack!.gatewayWith({ relayConnections: false });
    const before = posed.length;
    const res = await statelessCall(url);
    await res.arrayBuffer();
    assert.deepEqual(posed.slice(before), ['POST /mcp'], 'the runtime answered');
    assert.equal(res.status, 401, 'the runtime answer, not a 502');
    assert.equal(res.headers.get('www-authenticate'), null);
    assert.deepEqual(blamed(logs), []);
  });

  it('reaches the client on an event stream over HTTP/2, without that challenge', async () => {
    const { url, logs } = await stack!.gatewayWith({ relayConnections: true });
    const init = await fetch(url, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
        'mcp-protocol-version': LEGACY,
      },
      body: JSON.stringify({
        jsonrpc: '2.0',
        id: 1,
        method: 'initialize',
        params: { protocolVersion: LEGACY, capabilities: {}, clientInfo: { name: 'realm-test', version: '1' } },
      }),
    });
    await init.arrayBuffer();
    assert.equal(init.status, 200);
    const session = init.headers.get('mcp-session-id');
    assert.ok(session, 'a session');
    const before = posed.length;
    const res = await fetch(url, {
      headers: { accept: 'text/event-stream', 'mcp-protocol-version': LEGACY, 'mcp-session-id': session },
    });
    await res.arrayBuffer();
    assert.deepEqual(posed.slice(before), ['GET /mcp'], 'the runtime answered');
    assert.equal(res.status, 401, 'the runtime answer, not a 502');
    assert.equal(res.headers.get('www-authenticate'), null);
    assert.deepEqual(blamed(logs), []);
  });
});
