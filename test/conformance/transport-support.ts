// A gateway in front of a real scheduler replica and a runtime reached
// through its tunnel, and the same runtime's direct listener: two /mcp
// endpoints that the transport suites ask the same raw requests.
import assert from 'node:assert/strict';
import { once } from 'node:events';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { createGateway, type GatewayOptions } from '@switchyard/gateway';
import { startRuntimeNode } from '@switchyard/runtime';
import { createMetrics } from '@switchyard/service';
import { IN_PROCESS_TOKEN, startReplicas } from '../support/inprocess.ts';
import { until } from '../support/processes.ts';

const DIRECT_TOKEN = 'transport-direct-token-0123456789';
export const ACCEPT_BOTH = 'application/json, text/event-stream';
const quiet = { debug() {}, info() {}, warn() {}, error() {} };

/** Where a request goes, with what that endpoint needs besides the client's headers. */
export interface Endpoint {
  readonly name: 'gateway' | 'runtime';
  readonly url: string;
  readonly headers: Readonly<Record<string, string>>;
}

export interface Reply {
  readonly status: number;
  readonly headers: Headers;
  readonly text: string;
}

export interface TransportStack {
  /** The gateway first, then the runtime's direct listener. */
  readonly endpoints: readonly Endpoint[];
  close(): Promise<void>;
}

/** Starts the stack; `gatewayOptions` add to the gateway's (e.g. `allowedOrigins`). */
export async function startTransportStack(gatewayOptions: Partial<GatewayOptions> = {}): Promise<TransportStack> {
  const [scheduler] = await startReplicas(1);
  const runtime = await startRuntimeNode({
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
  const gateway = createGateway({
    schedulers: [scheduler!.url],
    defaultClass: 'demo',
    logger: quiet,
    ...gatewayOptions,
  });
  const server = http.createServer(gateway.app);
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  await until('the runtime to be schedulable', async () => {
    const res = await fetch(`${scheduler!.url}/api/schedule`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ class: 'demo', processId: 'probe', explain: true }),
    });
    return res.status === 200 || undefined;
  });
  let closing: Promise<void> | undefined;
  return {
    endpoints: [
      { name: 'gateway', url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/mcp`, headers: {} },
      {
        name: 'runtime',
        url: `${runtime.directUrl!}/mcp`,
        headers: { authorization: `Bearer ${DIRECT_TOKEN}`, 'x-switchyard-class': 'demo' },
      },
    ],
    close() {
      closing ??= (async () => {
        server.closeAllConnections();
        await new Promise((resolve) => server.close(resolve));
        await gateway.close();
        await runtime.close();
        await scheduler!.close();
      })();
      return closing;
    },
  };
}

export async function send(
  to: Endpoint,
  method: string,
  headers: Record<string, string>,
  body?: unknown,
): Promise<Reply> {
  const res = await fetch(to.url, {
    method,
    headers: { ...to.headers, ...headers },
    ...(body === undefined ? {} : { body: typeof body === 'string' ? body : JSON.stringify(body) }),
    signal: AbortSignal.timeout(10_000),
  });
  return { status: res.status, headers: res.headers, text: await res.text() };
}

/** The messages of an SSE body (empty priming events skipped), or the one message of a JSON body. */
export function messagesOf(reply: Reply): Array<{ id?: unknown; result?: unknown; error?: { code: number } }> {
  if (!(reply.headers.get('content-type') ?? '').startsWith('text/event-stream')) return [JSON.parse(reply.text)];
  return reply.text
    .split('\n')
    .filter((l) => l.startsWith('data: ') && l.length > 'data: '.length)
    .map((l) => JSON.parse(l.slice('data: '.length)));
}

export function initialize(protocolVersion: string): unknown {
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
export async function openSession(to: Endpoint, version: string): Promise<Record<string, string>> {
  const init = await send(to, 'POST', { 'content-type': 'application/json', accept: ACCEPT_BOTH }, initialize(version));
  assert.equal(init.status, 200, `${to.name}: ${init.text}`);
  const negotiated = (messagesOf(init)[0]?.result as { protocolVersion: string }).protocolVersion;
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
