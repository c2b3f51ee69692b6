// Client-side helpers of the process-level gateway suites: SDK clients of both
// generations, raw JSON-RPC over fetch, metric scraping and a throwaway
// redis-server. Everything here talks to real processes over loopback.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { createServer } from 'node:net';
import { Client } from '@modelcontextprotocol/client';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { Client as ClientV1 } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport as TransportV1 } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { setTimeout as sleep } from 'node:timers/promises';
import {
  REDIS_SERVER_BINARY,
  redisServerMissing,
  startRedisServer,
  type RedisServer,
  type RedisServerOptions,
} from '@switchyard/service/testing';
import { ownChild, until, type AppProcess } from '../support/processes.ts';

export const MODERN = '2026-07-28';
export const LEGACY = '2025-11-25';

/** The slice of both SDK clients the suites use. */
export interface AnyClient {
  callTool(params: { name: string; arguments?: Record<string, unknown> }): Promise<unknown>;
  listTools(): Promise<{ tools: Array<{ name: string }> }>;
  close(): Promise<void>;
}

export type Generation = 'v1' | 'v2' | 'v2-modern';

/** Connects an SDK client: v1 (legacy only), v2 legacy, or v2 pinned to 2026-07-28. */
export async function connect(
  generation: Generation,
  url: string,
  headers: Record<string, string> = {},
): Promise<AnyClient> {
  if (generation === 'v1') {
    const client = new ClientV1({ name: 'e2e-v1', version: '1.0.0' });
    await client.connect(new TransportV1(new URL(url), { requestInit: { headers } }));
    return client as unknown as AnyClient;
  }
  const client = new Client(
    { name: 'e2e-v2', version: '1.0.0' },
    generation === 'v2-modern' ? { versionNegotiation: { mode: { pin: MODERN } } } : {},
  );
  await client.connect(new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers } }));
  return client as unknown as AnyClient;
}

export interface CallOptions {
  readonly signal?: AbortSignal;
  readonly onprogress?: (progress: unknown) => void;
  /** The SDK's request timeout in ms (its default: 60 s). */
  readonly timeout?: number;
}

/** `tools/call` with request options, which SDK v1 takes third (after a result schema) and v2 second. */
export function callWith(
  generation: Generation,
  client: AnyClient,
  params: { name: string; arguments?: Record<string, unknown> },
  options: CallOptions,
): Promise<unknown> {
  const call = client.callTool as (...args: unknown[]) => Promise<unknown>;
  return generation === 'v1' ? call.call(client, params, undefined, options) : call.call(client, params, options);
}

/**
 * Opens v2 sessions at `url` until they sit on `runtimes` distinct runtimes
 * (placement is the scheduler's), `sessionsMax` at most. Each client goes
 * onto `clients` as it opens, so the caller closes them all even when this
 * throws. Resolves with the runtimes reached.
 */
export async function sessionsAcross(
  url: string,
  clients: AnyClient[],
  runtimes = 2,
  sessionsMax = 40,
): Promise<Set<string>> {
  const placed = new Set<string>();
  for (let opened = 0; placed.size < runtimes && opened < sessionsMax; opened++) {
    const client = await connect('v2', url);
    clients.push(client);
    placed.add((await whoami(client)).runtime);
  }
  return placed;
}

/**
 * A round of `counter` on every client: the n-th round expects n from each,
 * so a session that lost its sandbox (or a call that failed) shows, with
 * `when` saying at which step.
 */
export function counterRounds(clients: readonly AnyClient[]): (when: string) => Promise<void> {
  let rounds = 0;
  return async (when) => {
    rounds++;
    for (const client of clients) assert.equal(await counter(client), rounds, when);
  };
}

/**
 * Keeps `round`s of traffic going until `gateway` logs `message`, within 5 s:
 * a gateway reads a rotated token file when a request asks for the token
 * (at most once a second), not by itself.
 */
export async function underTrafficUntilLogged(
  gateway: AppProcess,
  message: string,
  round: (when: string) => Promise<void>,
): Promise<void> {
  for (let rounds = 0; !gateway.logs.some((l) => l.msg === message); rounds++) {
    assert.ok(rounds < 50, `${gateway.name} logged "${message}" within 5 s`);
    await round(`while ${gateway.name} reads its token file`);
    await sleep(100);
  }
}

/** Session id of a connected legacy client. */
export function sessionOf(client: AnyClient): string {
  const id = (client as unknown as { transport?: { sessionId?: string } }).transport?.sessionId;
  if (!id) throw new Error('client has no session id');
  return id;
}

export function textOf(result: unknown): string {
  const content = (result as { content?: Array<{ text?: string }> }).content ?? [];
  return content.map((c) => c.text ?? '').join('');
}

export interface Who {
  readonly runtime: string;
  readonly sandbox: string;
  readonly class: string;
}

export async function whoami(client: AnyClient): Promise<Who> {
  return JSON.parse(textOf(await client.callTool({ name: 'whoami', arguments: {} }))) as Who;
}

export async function counter(client: AnyClient): Promise<number> {
  return Number(textOf(await client.callTool({ name: 'counter', arguments: {} })));
}

export interface RawReply {
  readonly status: number;
  readonly headers: Headers;
  readonly text: string;
}

/** One raw POST of a JSON-RPC body (or any string) to `url`. */
export async function post(url: string, body: unknown, headers: Record<string, string> = {}): Promise<RawReply> {
  const res = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...headers },
    body: typeof body === 'string' ? body : JSON.stringify(body),
    signal: AbortSignal.timeout(15_000),
  });
  return { status: res.status, headers: res.headers, text: await res.text() };
}

/** The JSON-RPC result of a reply that is either JSON or a one-message SSE stream. */
export function rpcResult(reply: RawReply): Record<string, unknown> {
  // Skips the empty priming event a resumable SSE stream opens with.
  const line = reply.text.split('\n').find((l) => l.startsWith('data: ') && l.trim().length > 'data:'.length);
  const json = JSON.parse(line ? line.slice(6) : reply.text) as { result?: Record<string, unknown> };
  if (!json.result) throw new Error(`no result in ${reply.status}: ${reply.text.slice(0, 300)}`);
  return json.result;
}

export function initializeBody(id: number | string = 1, version = LEGACY): unknown {
  return {
    jsonrpc: '2.0',
    id,
    method: 'initialize',
    params: { protocolVersion: version, capabilities: {}, clientInfo: { name: 'raw', version: '1' } },
  };
}

/**
 * A legacy session opened over raw HTTP at `url` (initialize, then
 * notifications/initialized): the headers each request of it carries.
 */
export async function rawLegacySession(url: string): Promise<Record<string, string>> {
  const init = await post(url, initializeBody(), { 'mcp-protocol-version': LEGACY });
  assert.equal(init.status, 200, init.text);
  const session = { 'mcp-session-id': init.headers.get('mcp-session-id')!, 'mcp-protocol-version': LEGACY };
  assert.equal((await post(url, { jsonrpc: '2.0', method: 'notifications/initialized' }, session)).status, 202);
  return session;
}

export function toolCallBody(id: number, name: string, args: Record<string, unknown> = {}, modern = false): unknown {
  const meta = modern ? { _meta: { 'io.modelcontextprotocol/protocolVersion': MODERN } } : {};
  return { jsonrpc: '2.0', id, method: 'tools/call', params: { name, arguments: args, ...meta } };
}

/** Headers of a stateless 2026-07-28 request. */
export function modernHeaders(method: string, name?: string): Record<string, string> {
  return { 'mcp-protocol-version': MODERN, 'mcp-method': method, ...(name ? { 'mcp-name': name } : {}) };
}

/** Sum of a Prometheus series whose labels include every `labels` pair. */
export async function metric(baseUrl: string, name: string, labels: Record<string, string> = {}): Promise<number> {
  return seriesSum(await scrape(baseUrl), name, labels);
}

/** The `/metrics` text at `baseUrl`, for reading several series from one moment (`seriesSum`). */
export async function scrape(baseUrl: string): Promise<string> {
  const res = await fetch(`${baseUrl}/metrics`, { signal: AbortSignal.timeout(5000) });
  return res.text();
}

/** Sum of a series in a scrape whose labels include every `labels` pair. */
export function seriesSum(text: string, name: string, labels: Record<string, string> = {}): number {
  let sum = 0;
  for (const line of text.split('\n')) {
    if (!line.startsWith(name)) continue;
    const match = /^([a-z_]+)(\{[^}]*\})? ([0-9.e+-]+)$/.exec(line);
    if (!match || match[1] !== name) continue;
    const set = match[2] ?? '';
    if (Object.entries(labels).every(([k, v]) => set.includes(`${k}="${v}"`))) sum += Number(match[3]);
  }
  return sum;
}

/**
 * Through the gateway at `base` (no `/mcp`): sessions on both runtimes r0
 * and r1 (sessionsAcross), each counting 1, 2, 3, and all their GET streams
 * open at the gateway. Clients go onto `clients`, for the caller to close.
 */
export async function countOnBothRuntimes(base: string, clients: AnyClient[]): Promise<void> {
  const placed = await sessionsAcross(`${base}/mcp`, clients);
  assert.deepEqual([...placed].sort(), ['r0', 'r1']);
  for (const client of clients) for (let n = 1; n <= 3; n++) assert.equal(await counter(client), n);
  await until(`${clients.length} GET streams open through the gateway`, async () =>
    (await metric(base, 'switchyard_gateway_sse_streams_open')) >= clients.length ? true : undefined,
  );
}

/** Waits until the scheduler at `schedulerUrl` places a process of class `demo`: a runtime of it is in its view. */
export async function untilSchedulable(schedulerUrl: string, what: string): Promise<void> {
  await until(what, async () => {
    const res = await fetch(`${schedulerUrl}/api/schedule`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ class: 'demo', processId: 'probe' }),
    });
    await res.body?.cancel();
    return res.status === 200 || undefined;
  });
}

/** A port the kernel says is free right now. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const port = (server.address() as { port: number }).port;
      server.close(() => resolve(port));
    });
  });
}

/** Why this machine has no IPv6 loopback (a container with IPv6 off), or false when a listener can bind ::1. */
export const ipv6Missing: string | false = await new Promise((resolve) => {
  const server = createServer();
  server.once('error', (error: NodeJS.ErrnoException) => resolve(`::1 cannot be bound here (${error.code})`));
  server.listen(0, '::1', () => server.close(() => resolve(false)));
});

export type { RedisServer, RedisServerOptions };
export const REDIS_BINARY = REDIS_SERVER_BINARY;
export const redisMissing = redisServerMissing;

/** Why redis-server cannot serve TLS here (built without it, or missing), else false. */
export function redisTlsMissing(): string | false {
  if (redisMissing) return redisMissing;
  // Built with TLS, it takes the directive and finds nothing left to listen on.
  const probe = spawnSync(REDIS_BINARY, ['--port', '0', '--tls-port', '0'], { encoding: 'utf8', timeout: 5_000 });
  return `${probe.stdout}${probe.stderr}`.includes('not listen anywhere') ? false : 'redis-server is built without TLS';
}

/** A throwaway redis-server on a free loopback port, without persistence, stopped when this process exits. */
export async function startRedis(options: RedisServerOptions = {}): Promise<RedisServer> {
  const server = await startRedisServer(options);
  ownChild(server.child);
  return server;
}

/** A raw legacy `tools/call` of `name` (request id 7) in session `id`, sent to `url` with `headers`. */
export function callInSession(
  url: string,
  id: string,
  name: string,
  headers: Record<string, string>,
): Promise<RawReply> {
  return post(url, toolCallBody(7, name), { ...headers, 'mcp-session-id': id, 'mcp-protocol-version': LEGACY });
}
