// Raw MCP calls through a replica's proxy: enough to create sandboxes and
// sessions on a runtime (and to hold a request open) without a gateway.
const ACCEPT = 'application/json, text/event-stream';

export interface McpTarget {
  /** Scheduler base URL. */
  readonly scheduler: string;
  readonly runtime: string;
  readonly process: string;
}

function headers(target: McpTarget, session?: string): Record<string, string> {
  return {
    'content-type': 'application/json',
    accept: ACCEPT,
    'x-switchyard-class': 'demo',
    'x-switchyard-process': target.process,
    ...(session ? { 'mcp-session-id': session, 'mcp-protocol-version': '2025-06-18' } : {}),
  };
}

function mcpUrl(target: McpTarget): string {
  return `${target.scheduler}/api/proxy/${encodeURIComponent(target.runtime)}/mcp`;
}

/** Legacy `initialize` + `notifications/initialized`; returns the session id. */
export async function openSession(target: McpTarget): Promise<string> {
  const res = await fetch(mcpUrl(target), {
    method: 'POST',
    headers: headers(target),
    body: JSON.stringify({
      jsonrpc: '2.0',
      id: 1,
      method: 'initialize',
      params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'cluster-test', version: '1' } },
    }),
    signal: AbortSignal.timeout(5000),
  });
  const session = res.headers.get('mcp-session-id');
  await res.text();
  if (res.status !== 200 || !session) throw new Error(`initialize through ${mcpUrl(target)} answered ${res.status}`);
  const ack = await fetch(mcpUrl(target), {
    method: 'POST',
    headers: headers(target, session),
    body: JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }),
    signal: AbortSignal.timeout(5000),
  });
  await ack.text();
  return session;
}

/**
 * Starts a `sleep` tool call and resolves once its response headers arrived,
 * so the call is in flight inside the runtime. `done` settles when the body
 * ends or fails.
 */
export async function startSleep(
  target: McpTarget,
  session: string,
  ms: number,
): Promise<{ status: number; done: Promise<{ ok: boolean; error?: string; atMs: number }> }> {
  const res = await fetch(mcpUrl(target), {
    method: 'POST',
    headers: headers(target, session),
    body: JSON.stringify({
      jsonrpc: '2.0',
      id: 2,
      method: 'tools/call',
      params: { name: 'sleep', arguments: { ms }, _meta: { progressToken: 'p' } },
    }),
  });
  const done = res
    .text()
    .then((text) => ({ ok: /"result"/.test(text), atMs: performance.now() }))
    .catch((error: unknown) => ({ ok: false, error: String(error), atMs: performance.now() }));
  return { status: res.status, done };
}
