// The server MUSTs of the Streamable HTTP transport (MCP 2025-03-26,
// 2025-06-18, 2025-11-25) that the gateway and the runtime meet, asked with
// raw fetch of both (see transport-support.ts), so that a change to either
// that breaks one shows here. Where the spec leaves the server free (a batch
// under a revision that dropped batches), the gateway must answer as the
// runtime does.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import {
  ACCEPT_BOTH,
  initialize,
  messagesOf,
  openSession,
  send,
  startTransportStack,
  type Endpoint,
  type Reply,
  type TransportStack,
} from './transport-support.ts';

const ALLOWED_ORIGIN = 'http://allowed.example';
const JSON_TYPE = { 'content-type': 'application/json' };

function errorCodeOf(reply: Reply): unknown {
  return (JSON.parse(reply.text) as { error?: { code?: unknown } }).error?.code;
}

describe('Streamable HTTP transport server rules, gateway and runtime alike', () => {
  let stack: TransportStack | undefined;
  let endpoints: readonly Endpoint[] = [];
  before(async () => {
    stack = await startTransportStack({ allowedOrigins: [ALLOWED_ORIGIN] });
    endpoints = stack.endpoints;
  });
  after(() => stack?.close());

  it('answers a POST whose Accept does not list both JSON and SSE 406 with a JSON-RPC error', async () => {
    for (const to of endpoints) {
      for (const accept of ['application/json', 'text/event-stream', '']) {
        const reply = await send(to, 'POST', { ...JSON_TYPE, accept }, initialize('2025-11-25'));
        assert.equal(reply.status, 406, `${to.name} Accept "${accept}": ${reply.text}`);
        assert.equal(typeof errorCodeOf(reply), 'number');
        assert.equal(reply.headers.get('mcp-session-id'), null, `${to.name} opened a session for a 406`);
      }
    }
  });

  it('mints session ids of visible ASCII only (0x21-0x7E)', async () => {
    for (const to of endpoints) {
      const headers = await openSession(to, '2025-11-25');
      assert.match(headers['mcp-session-id']!, /^[\x21-\x7e]+$/, to.name);
    }
  });

  it('accepts a POST of only a notification or a response with 202 and no body', async () => {
    for (const to of endpoints) {
      const headers = await openSession(to, '2025-11-25');
      const inputs = [
        { jsonrpc: '2.0', method: 'notifications/roots/list_changed' },
        { jsonrpc: '2.0', id: 'server-asked-1', result: {} },
      ];
      for (const input of inputs) {
        const reply = await send(to, 'POST', headers, input);
        assert.equal(reply.status, 202, `${to.name} ${JSON.stringify(input)}: ${reply.text}`);
        assert.equal(reply.text, '', to.name);
      }
    }
  });

  it('serves a session request without MCP-Protocol-Version (taken as 2025-03-26)', async () => {
    for (const to of endpoints) {
      const { 'mcp-protocol-version': _, ...headers } = await openSession(to, '2025-03-26');
      const reply = await send(to, 'POST', headers, { jsonrpc: '2.0', id: 2, method: 'ping' });
      assert.equal(reply.status, 200, `${to.name}: ${reply.text}`);
      assert.deepEqual(messagesOf(reply).at(-1)?.result, {}, to.name);
    }
  });

  it('answers an unsupported MCP-Protocol-Version 400 on POST, GET and DELETE', async () => {
    for (const to of endpoints) {
      const headers = { ...(await openSession(to, '2025-11-25')), 'mcp-protocol-version': '1999-01-01' };
      const asks = [
        send(to, 'POST', headers, { jsonrpc: '2.0', id: 2, method: 'ping' }),
        send(to, 'GET', { ...headers, accept: 'text/event-stream' }),
        send(to, 'DELETE', headers),
      ];
      for (const reply of await Promise.all(asks)) {
        assert.equal(reply.status, 400, `${to.name}: ${reply.text}`);
        assert.equal(typeof errorCodeOf(reply), 'number');
      }
    }
  });

  it('answers an unsupported MCP-Protocol-Version on initialize 400 at the gateway', async () => {
    // The runtime's SDK reads only the body's protocolVersion on initialize;
    // clients reach runtimes through gateways, which apply the transport rule.
    const [gateway] = endpoints;
    const headers = { ...JSON_TYPE, accept: ACCEPT_BOTH, 'mcp-protocol-version': '1999-01-01' };
    const reply = await send(gateway!, 'POST', headers, initialize('2025-11-25'));
    assert.equal(reply.status, 400, reply.text);
    assert.equal(reply.headers.get('mcp-session-id'), null);
  });

  it('answers every method of an unknown session 404, and of a session once DELETEd', async () => {
    for (const to of endpoints) {
      const live = await openSession(to, '2025-11-25');
      const ended = await send(to, 'DELETE', live);
      assert.equal(ended.status, 200, `${to.name}: ${ended.text}`);
      for (const headers of [live, { ...live, 'mcp-session-id': 'never-issued-0123' }]) {
        const asks = [
          send(to, 'POST', headers, { jsonrpc: '2.0', id: 3, method: 'tools/list' }),
          send(to, 'GET', { ...headers, accept: 'text/event-stream' }),
          send(to, 'DELETE', headers),
        ];
        for (const reply of await Promise.all(asks)) {
          assert.equal(reply.status, 404, `${to.name}: ${reply.text}`);
          assert.equal(typeof errorCodeOf(reply), 'number');
        }
      }
    }
  });

  it('answers a GET whose Accept lacks text/event-stream 405 or 406, never a stream', async () => {
    for (const to of endpoints) {
      const headers = await openSession(to, '2025-11-25');
      const reply = await send(to, 'GET', { ...headers, accept: 'application/json' });
      assert.ok([405, 406].includes(reply.status), `${to.name}: ${reply.status} ${reply.text}`);
      assert.equal(typeof errorCodeOf(reply), 'number');
    }
  });

  it('answers a 2025-03-26 batch: one response per request, 202 for notifications only', async () => {
    for (const to of endpoints) {
      const headers = await openSession(to, '2025-03-26');
      const requests = [
        { jsonrpc: '2.0', id: 'a', method: 'ping' },
        { jsonrpc: '2.0', id: 'b', method: 'tools/list' },
      ];
      const both = await send(to, 'POST', headers, requests);
      assert.equal(both.status, 200, `${to.name}: ${both.text}`);
      assert.deepEqual(
        messagesOf(both)
          .map((m) => m.id)
          .sort(),
        ['a', 'b'],
        to.name,
      );
      const notified = await send(to, 'POST', headers, [
        { jsonrpc: '2.0', method: 'notifications/roots/list_changed' },
      ]);
      assert.equal(notified.status, 202, `${to.name}: ${notified.text}`);
    }
  });

  // 2025-06-18 removed batches from what a client may send, without saying
  // what a server does with one; the runtime's SDK still answers them.
  for (const version of ['2025-06-18', '2025-11-25']) {
    it(`answers a ${version} batch as the runtime does`, async () => {
      const statuses: number[] = [];
      for (const to of endpoints) {
        const headers = await openSession(to, version);
        const reply = await send(to, 'POST', headers, [{ jsonrpc: '2.0', id: 'a', method: 'ping' }]);
        statuses.push(reply.status);
      }
      assert.equal(statuses[0], statuses[1], `gateway ${statuses[0]}, runtime ${statuses[1]}`);
    });
  }

  it('refuses an initialize inside a batch 400', async () => {
    for (const to of endpoints) {
      const reply = await send(to, 'POST', { ...JSON_TYPE, accept: ACCEPT_BOTH }, [initialize('2025-03-26')]);
      assert.equal(reply.status, 400, `${to.name}: ${reply.text}`);
      assert.equal(reply.headers.get('mcp-session-id'), null);
    }
  });

  it('answers a foreign Origin 403 with a JSON-RPC error without an id, and serves an allowed one', async () => {
    const [gateway] = endpoints;
    const headers = { ...JSON_TYPE, accept: ACCEPT_BOTH };
    for (const method of ['POST', 'GET', 'DELETE']) {
      const reply = await send(
        gateway!,
        method,
        { ...headers, origin: 'http://evil.example' },
        method === 'POST' ? initialize('2025-11-25') : undefined,
      );
      assert.equal(reply.status, 403, `${method}: ${reply.text}`);
      assert.equal((JSON.parse(reply.text) as { id?: unknown }).id, null);
    }
    const allowed = await send(gateway!, 'POST', { ...headers, origin: ALLOWED_ORIGIN }, initialize('2025-11-25'));
    assert.equal(allowed.status, 200, allowed.text);
  });

  it('resumes a dropped POST stream on a GET with Last-Event-ID, after the retry the stream named', async () => {
    for (const to of endpoints) {
      const headers = await openSession(to, '2025-11-25');
      const dropped = new AbortController();
      const call = await fetch(to.url, {
        method: 'POST',
        headers: { ...to.headers, ...headers },
        signal: dropped.signal,
        body: JSON.stringify({
          jsonrpc: '2.0',
          id: 9,
          method: 'tools/call',
          params: { name: 'sleep', arguments: { ms: 1500 }, _meta: { progressToken: 'p' } },
        }),
      });
      // Read up to the first progress notification, then drop the connection.
      const reader = call.body!.getReader();
      let seen = '';
      for (let chunks = 0; !/"method":"notifications\/progress"[^\n]*\n\n/.test(seen); chunks++) {
        assert.ok(chunks < 100, `${to.name}: no progress in ${seen}`);
        const { value, done } = await reader.read();
        assert.ok(!done, `${to.name}: the stream ended before any progress: ${seen}`);
        seen += Buffer.from(value).toString();
      }
      dropped.abort();
      const lastId = [...seen.matchAll(/^id: (.+)$/gm)].at(-1)?.[1];
      const retryMs = Number(/^retry: (\d+)$/m.exec(seen)?.[1]);
      assert.ok(lastId && retryMs > 0, `${to.name}: no event id or retry in ${seen}`);
      // The client MUST wait `retry` before it reconnects (2025-11-25).
      await new Promise((resolve) => setTimeout(resolve, retryMs));
      const resumed = await send(to, 'GET', { ...headers, accept: 'text/event-stream', 'last-event-id': lastId });
      assert.equal(resumed.status, 200, `${to.name}: ${resumed.text}`);
      const messages = messagesOf(resumed);
      assert.ok(
        messages.every((m) => !String(JSON.stringify(m)).includes(`"progress":100,`)),
        to.name,
      );
      assert.deepEqual(messages.at(-1)?.result, { content: [{ type: 'text', text: 'slept 1500' }] }, to.name);
    }
  });
});
