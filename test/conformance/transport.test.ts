// The Streamable HTTP transport's server rules (MCP 2025-03-26, 2025-06-18,
// 2025-11-25), asked with raw fetch of a gateway (in front of a real
// scheduler replica and a runtime reached through its tunnel) and of the
// same runtime's direct listener. The gateway must answer as the runtime
// does: no valid request turned into an error, no invalid one into a success.
import assert from 'node:assert/strict';
import { once } from 'node:events';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { createGateway, type Gateway } from '@switchyard/gateway';
import { startRuntimeNode, type RuntimeNode } from '@switchyard/runtime';
import type { SchedulerReplica } from '@switchyard/scheduler';
import { createMetrics } from '@switchyard/service';
import { IN_PROCESS_TOKEN, startReplicas } from '../support/inprocess.ts';
import { until } from '../support/processes.ts';

const DIRECT_TOKEN = 'transport-direct-token-0123456789';
const ACCEPT_BOTH = 'application/json, text/event-stream';
const quiet = { debug() {}, info() {}, warn() {}, error() {} };

/** Where a request goes, with what that endpoint needs besides the client's headers. */
interface Endpoint {
  readonly name: string;
  readonly url: string;
  readonly headers: Readonly<Record<string, string>>;
}

interface Reply {
  readonly status: number;
  readonly headers: Headers;
  readonly text: string;
}

async function send(to: Endpoint, method: string, headers: Record<string, string>, body?: unknown): Promise<Reply> {
  const res = await fetch(to.url, {
    method,
    headers: { ...to.headers, ...headers },
    ...(body === undefined ? {} : { body: typeof body === 'string' ? body : JSON.stringify(body) }),
    signal: AbortSignal.timeout(10_000),
  });
  return { status: res.status, headers: res.headers, text: await res.text() };
}

/** The one JSON-RPC message of a JSON body or of an SSE body (the empty priming event skipped). */
function messageOf(reply: Reply): { result?: unknown; error?: { code: number } } {
  const data = reply.text.split('\n').find((l) => l.startsWith('data: ') && l.length > 'data: '.length);
  return JSON.parse(data ? data.slice('data: '.length) : reply.text) as { result?: unknown; error?: { code: number } };
}

function initialize(protocolVersion: string): unknown {
  return {
    jsonrpc: '2.0',
    id: 1,
    method: 'initialize',
    params: { protocolVersion, capabilities: {}, clientInfo: { name: 'transport-test', version: '1' } },
  };
}

/**
 * Opens a session as a client that asked for `version` does: `initialize`,
 * then `notifications/initialized` with the negotiated version in
 * `MCP-Protocol-Version`. Returns the headers of its later requests.
 */
async function openSession(to: Endpoint, version: string): Promise<Record<string, string>> {
  const init = await send(to, 'POST', { 'content-type': 'application/json', accept: ACCEPT_BOTH }, initialize(version));
  assert.equal(init.status, 200, `${to.name}: ${init.text}`);
  const negotiated = (messageOf(init).result as { protocolVersion: string }).protocolVersion;
  const session = init.headers.get('mcp-session-id');
  assert.ok(session, `${to.name}: initialize answered no session id`);
  const headers = {
    'content-type': 'application/json',
    accept: ACCEPT_BOTH,
    'mcp-session-id': session,
    'mcp-protocol-version': negotiated,
  };
  const initialized = await send(to, 'POST', headers, { jsonrpc: '2.0', method: 'notifications/initialized' });
  assert.equal(initialized.status, 202, `${to.name}: ${initialized.text}`);
  return headers;
}

describe('Streamable HTTP transport rules, gateway and runtime alike', () => {
  let scheduler: SchedulerReplica | undefined;
  let runtime: RuntimeNode | undefined;
  let gateway: Gateway | undefined;
  let server: http.Server | undefined;
  const endpoints: Endpoint[] = [];

  before(async () => {
    [scheduler] = await startReplicas(1);
    runtime = await startRuntimeNode({
      runtimeId: 'rt-transport',
      schedulerUrl: scheduler!.url,
      joinToken: IN_PROCESS_TOKEN,
      classes: { demo: { engine: 'builtin' } },
      sandboxesMax: 50,
      sessionIdleMs: 60_000,
      direct: { host: '127.0.0.1', port: 0, tokens: [DIRECT_TOKEN] },
      logger: quiet,
      metrics: createMetrics('runtime'),
    });
    await runtime.whenConnected();
    gateway = createGateway({ schedulers: [scheduler!.url], defaultClass: 'demo', logger: quiet });
    server = http.createServer(gateway.app);
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    endpoints.push(
      { name: 'gateway', url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/mcp`, headers: {} },
      {
        name: 'runtime',
        url: `${runtime.directUrl!}/mcp`,
        headers: { authorization: `Bearer ${DIRECT_TOKEN}`, 'x-switchyard-class': 'demo' },
      },
    );
    await until('the runtime to be schedulable', async () => {
      const res = await fetch(`${scheduler!.url}/api/schedule`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ class: 'demo', processId: 'probe', explain: true }),
      });
      return res.status === 200 || undefined;
    });
  });
  after(async () => {
    server?.closeAllConnections();
    await new Promise((resolve) => server?.close(resolve) ?? resolve(undefined));
    await gateway?.close();
    await runtime?.close();
    await scheduler?.close();
  });

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
        const tools = (messageOf(list).result as { tools: Array<{ name: string }> }).tools.map((t) => t.name);
        assert.ok(tools.includes('echo'), `${to.name}: ${list.text}`);
        const ended = await send(to, 'DELETE', headers);
        assert.equal(ended.status, 200, `${to.name}: ${ended.text}`);
      }
    });
  }
});
