// The Streamable HTTP transport's server rules (MCP 2025-03-26, 2025-06-18,
// 2025-11-25), asked with raw fetch of a gateway (in front of a real
// scheduler replica and a runtime reached through its tunnel) and of the
// same runtime's direct listener. The gateway must answer as the runtime
// does: no valid request turned into an error, no invalid one into a success.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import {
  ACCEPT_BOTH,
  messagesOf,
  openSession,
  send,
  startTransportStack,
  type Endpoint,
  type TransportStack,
} from './transport-support.ts';

describe('Streamable HTTP transport rules, gateway and runtime alike', () => {
  let stack: TransportStack | undefined;
  let endpoints: readonly Endpoint[] = [];
  before(async () => {
    stack = await startTransportStack();
    endpoints = stack.endpoints;
  });
  after(() => stack?.close());

  // The transport answers a method it does not serve 405; HTTP (RFC 9110
  // §15.5.6) requires such an answer to list in Allow what the resource takes.
  const refusedMethods: ReadonlyArray<{ method: string; headers: Record<string, string>; allows: string }> = [
    { method: 'PUT', headers: {}, allows: 'POST' },
    { method: 'GET', headers: { accept: 'text/event-stream' }, allows: 'POST' },
    { method: 'DELETE', headers: {}, allows: 'POST' },
  ];
  for (const c of refusedMethods) {
    const why = c.method === 'PUT' ? 'a method /mcp never serves' : `${c.method} without a session`;
    it(`answers ${why} 405 with an Allow header and a JSON-RPC error`, async () => {
      for (const to of endpoints) {
        const reply = await send(to, c.method, c.headers);
        assert.equal(reply.status, 405, `${to.name}: ${reply.text}`);
        const allow = (reply.headers.get('allow') ?? '').split(',').map((m) => m.trim());
        assert.ok(allow.includes(c.allows), `${to.name} Allow: ${reply.headers.get('allow')}`);
        assert.equal(typeof (JSON.parse(reply.text) as { error?: { code?: unknown } }).error?.code, 'number');
      }
    });
  }

  // "If the server cannot accept the input [a response or a notification],
  // it MUST return an HTTP error status code. The HTTP response body MAY
  // comprise a JSON-RPC error response that has no id." An id there would
  // be the client's own answer's id, which a client may also be using for
  // a request of its own.
  const refusedResponses = [
    { name: 'without a session', session: undefined, status: 400 },
    { name: 'of an unknown session', session: 'no-such-session', status: 404 },
  ];
  for (const c of refusedResponses) {
    it(`refuses a posted JSON-RPC response ${c.name} with ${c.status} and an error without an id`, async () => {
      for (const to of endpoints) {
        const headers = {
          'content-type': 'application/json',
          accept: ACCEPT_BOTH,
          'mcp-protocol-version': '2025-11-25',
          ...(c.session ? { 'mcp-session-id': c.session } : {}),
        };
        const reply = await send(to, 'POST', headers, { jsonrpc: '2.0', id: 7, result: {} });
        assert.equal(reply.status, c.status, `${to.name}: ${reply.text}`);
        const body = JSON.parse(reply.text) as { id?: unknown; error?: { code?: unknown } };
        assert.equal(typeof body.error?.code, 'number', `${to.name}: ${reply.text}`);
        assert.equal(body.id, null, `${to.name}: ${reply.text}`);
      }
    });
  }

  // The runtime's SDK still negotiates these two older revisions with a
  // client that asks for them, and the client then names its revision in
  // MCP-Protocol-Version on every later request (2025-06-18 transport rules).
  for (const version of ['2024-11-05', '2024-10-07']) {
    it(`serves a session that negotiated ${version} when its requests name that revision`, async () => {
      for (const to of endpoints) {
        const headers = await openSession(to, version);
        assert.equal(headers['mcp-protocol-version'], version, `${to.name} negotiated another revision`);
        const list = await send(to, 'POST', headers, { jsonrpc: '2.0', id: 2, method: 'tools/list' });
        assert.equal(list.status, 200, `${to.name}: ${list.text}`);
        const tools = (messagesOf(list)[0]?.result as { tools: Array<{ name: string }> }).tools.map((t) => t.name);
        assert.ok(tools.includes('echo'), `${to.name}: ${list.text}`);
        const ended = await send(to, 'DELETE', headers);
        assert.equal(ended.status, 200, `${to.name}: ${ended.text}`);
      }
    });
  }
});
