// Shared by the runtime node tests: options for a node whose scheduler is
// unreachable (the direct listener serves MCP while the tunnel redials) and
// a legacy JSON-RPC POST to that listener.
import assert from 'node:assert/strict';
import { createMetrics } from '@switchyard/service';
import type { RuntimeNodeOptions } from '../src/index.ts';

export const TOKEN = 'runtime-test-token-0123456789';
export const LEGACY = '2025-11-25';
const quiet = { debug() {}, info() {}, warn() {}, error() {} };

/**
 * A scheduler nothing listens for, so the tunnel dial fails fast: a privileged port no test binds, not one
 * just released, which a test running alongside may take meanwhile.
 */
const DEAD_SCHEDULER_URL = 'http://127.0.0.1:1';

export async function nodeOptions(
  classes: RuntimeNodeOptions['classes'],
  engines?: RuntimeNodeOptions['engines'],
): Promise<RuntimeNodeOptions> {
  return {
    runtimeId: 'rt-test',
    schedulerUrl: DEAD_SCHEDULER_URL,
    joinToken: 'join-token-0123456789',
    classes,
    ...(engines ? { engines } : {}),
    sandboxesMax: 4,
    sessionIdleMs: 60_000,
    direct: { host: '127.0.0.1', port: 0, tokens: [TOKEN] },
    logger: quiet,
    metrics: createMetrics('runtime'),
  };
}

export interface RpcReply {
  readonly result?: { readonly tools?: ReadonlyArray<{ readonly name: string }> };
  readonly error?: { readonly code: number; readonly message: string };
}

/** One legacy JSON-RPC POST to the direct listener; the reply may be JSON or a one-event SSE body. */
export async function rpc(
  url: string,
  cls: string,
  body: object,
  session?: string,
  status = 200,
  token = TOKEN,
): Promise<{ session?: string; json: RpcReply }> {
  const res = await fetch(`${url}/mcp`, {
    method: 'POST',
    headers: {
      authorization: `Bearer ${token}`,
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      'mcp-protocol-version': LEGACY,
      'x-switchyard-class': cls,
      ...(session ? { 'mcp-session-id': session } : {}),
    },
    body: JSON.stringify(body),
  });
  const text = await res.text();
  assert.equal(res.status, status, text);
  const data = text.startsWith('{') ? text : /^data: (.+)$/m.exec(text)?.[1];
  return { session: res.headers.get('mcp-session-id') ?? undefined, json: JSON.parse(data ?? '{}') as RpcReply };
}

/** The value of one series in the node's `/metrics` (as Prometheus scrapes it), undefined when absent. */
export async function scrape(url: string, series: string): Promise<number | undefined> {
  const res = await fetch(`${url}/metrics`, { headers: { authorization: `Bearer ${TOKEN}` } });
  const text = await res.text();
  assert.equal(res.status, 200, text);
  const line = text.split('\n').find((l) => l.startsWith(`${series} `));
  return line === undefined ? undefined : Number(line.slice(series.length + 1));
}
