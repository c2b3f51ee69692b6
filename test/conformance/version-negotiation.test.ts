// How a 2026-07-28 client finds a revision both sides speak when it offers
// one the server does not know: the server answers -32022 with the
// revisions it supports (`data.supported`), and the client retries with
// one of them. The runtime's SDK answers so; the gateway in front of it
// must too, or an SDK v2 client falls back to a legacy session (or, offering
// no legacy revision, cannot connect) where it would speak 2026-07-28 with
// the runtime directly.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { ACCEPT_BOTH, send, startTransportStack, type Endpoint, type TransportStack } from './transport-support.ts';

const LATER = '2099-01-01';
const MODERN = '2026-07-28';
const UNSUPPORTED_PROTOCOL_VERSION = -32022;
const META = 'io.modelcontextprotocol';

function discover(claimed: string): unknown {
  const meta = {
    [`${META}/protocolVersion`]: claimed,
    [`${META}/clientInfo`]: { name: 'negotiation-test', version: '1.0.0' },
    [`${META}/clientCapabilities`]: {},
  };
  return { jsonrpc: '2.0', id: 'probe-1', method: 'server/discover', params: { _meta: meta } };
}

describe('protocol version negotiation, gateway and runtime alike', () => {
  let stack: TransportStack | undefined;
  let endpoints: readonly Endpoint[] = [];
  before(async () => {
    stack = await startTransportStack();
    endpoints = stack.endpoints;
  });
  after(() => stack?.close());

  const offers = [
    { name: 'a 2026-07-28-only client', versions: [LATER, MODERN] },
    { name: 'a client that could fall back to a legacy session', versions: [LATER, MODERN, '2025-11-25'] },
  ];
  for (const offer of offers) {
    it(`lets ${offer.name} offering a later revision first settle on 2026-07-28`, async () => {
      for (const to of endpoints) {
        const client = new Client(
          { name: 'negotiation-test', version: '1.0.0' },
          { supportedProtocolVersions: offer.versions, versionNegotiation: { mode: 'auto' } },
        );
        try {
          const transport = new StreamableHTTPClientTransport(new URL(to.url), {
            requestInit: { headers: to.headers },
          });
          await client.connect(transport);
          assert.equal(client.getNegotiatedProtocolVersion(), MODERN, to.name);
          assert.ok((await client.listTools()).tools.length > 0, to.name);
        } finally {
          await client.close();
        }
      }
    });
  }

  const refusals: ReadonlyArray<{ name: string; headers: Record<string, string> }> = [
    { name: 'in the body and MCP-Protocol-Version', headers: { 'mcp-protocol-version': LATER } },
    { name: 'in the body only', headers: {} },
  ];
  for (const c of refusals) {
    it(`refuses a revision it does not know, named ${c.name}, 400 -32022 listing 2026-07-28`, async () => {
      for (const to of endpoints) {
        const headers = { 'content-type': 'application/json', accept: ACCEPT_BOTH, ...c.headers };
        const reply = await send(to, 'POST', headers, discover(LATER));
        assert.equal(reply.status, 400, `${to.name}: ${reply.text}`);
        const { error } = JSON.parse(reply.text) as {
          error: { code: number; data?: { supported?: unknown; requested?: unknown } };
        };
        assert.equal(error.code, UNSUPPORTED_PROTOCOL_VERSION, `${to.name}: ${reply.text}`);
        assert.ok(Array.isArray(error.data?.supported) && error.data.supported.includes(MODERN), reply.text);
        assert.equal(error.data?.requested, LATER, `${to.name}: ${reply.text}`);
      }
    });
  }
});
