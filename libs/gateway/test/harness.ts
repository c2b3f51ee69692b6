// Wires a gateway to real runtimes through the scheduler test double, all on
// 127.0.0.1 port 0, and tears everything down in one idempotent close().
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { createGateway } from '@switchyard/gateway';
import type { Gateway, GatewayOptions } from '@switchyard/gateway';
import { startRuntime } from './fixtures/runtime.ts';
import type { TestRuntime } from './fixtures/runtime.ts';
import { startSchedulerDouble } from './fixtures/scheduler-double.ts';
import type { SchedulerDouble } from './fixtures/scheduler-double.ts';

export interface Harness {
  readonly gateway: Gateway;
  readonly url: string;
  readonly runtimes: TestRuntime[];
  readonly scheduler: SchedulerDouble;
  close(): Promise<void>;
}

export async function listen(gateway: Gateway): Promise<{ server: Server; url: string }> {
  const server = createServer(gateway.app);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/mcp` };
}

export async function stopServer(server: Server): Promise<void> {
  server.closeAllConnections();
  await new Promise<void>((resolve) => server.close(() => resolve()));
}

export async function startHarness(
  runtimeCount = 2,
  options: Partial<GatewayOptions> = {},
  scheduler?: SchedulerDouble,
): Promise<Harness> {
  const runtimes = await Promise.all(Array.from({ length: runtimeCount }, (_, i) => startRuntime(`rt-${i}`)));
  const double = scheduler ?? (await startSchedulerDouble(runtimes.map((r) => ({ id: r.id, address: r.address }))));
  const gateway = createGateway({ schedulers: [double.url], upstreamMode: 'direct', ...options });
  const { server, url } = await listen(gateway);
  let closing: Promise<void> | undefined;
  return {
    gateway,
    url,
    runtimes,
    scheduler: double,
    close() {
      closing ??= (async () => {
        await stopServer(server);
        await gateway.close();
        await Promise.all(runtimes.map((r) => r.close()));
        if (!scheduler) await double.close();
      })();
      return closing;
    },
  };
}

/** A v2 client in the legacy (session) era, or pinned to 2026-07-28. */
export async function connectV2(
  url: string,
  mode: 'legacy' | 'modern' = 'legacy',
  headers: Record<string, string> = {},
): Promise<Client> {
  const client = new Client(
    { name: 'test', version: '1.0.0' },
    mode === 'modern' ? { versionNegotiation: { mode: { pin: '2026-07-28' } } } : {},
  );
  await client.connect(new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers } }));
  return client;
}

export function textOf(result: unknown): string {
  const content = (result as { content?: { type: string; text?: string }[] }).content ?? [];
  return content.map((c) => c.text ?? '').join('');
}

/** Raw POST through fetch, for status-code tables. */
export async function post(
  url: string,
  body: unknown,
  headers: Record<string, string> = {},
): Promise<{ status: number; headers: Headers; json: unknown }> {
  const res = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...headers },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
  const text = await res.text();
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    json = text;
  }
  return { status: res.status, headers: res.headers, json };
}

export const INITIALIZE = {
  jsonrpc: '2.0',
  id: 1,
  method: 'initialize',
  params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'raw', version: '1' } },
};

/** A legacy session opened at `url` with `headers` (INITIALIZE), past its `initialized` notification; its id. */
export async function openSession(url: string, headers: Record<string, string>): Promise<string> {
  const res = await post(url, INITIALIZE, headers);
  assert.equal(res.status, 200, JSON.stringify(res.json));
  const id = res.headers.get('mcp-session-id')!;
  const initialized = { jsonrpc: '2.0', method: 'notifications/initialized' };
  assert.equal((await post(url, initialized, { ...headers, 'mcp-session-id': id })).status, 202);
  return id;
}

/** `headers` for a later request of session `id`, at INITIALIZE's protocol version. */
export const inSession = (id: string, headers: Record<string, string>): Record<string, string> => ({
  ...headers,
  'mcp-session-id': id,
  'mcp-protocol-version': INITIALIZE.params.protocolVersion,
});
