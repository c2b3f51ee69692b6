// Raw legacy MCP over an undici Pool: initialize a session, call a tool,
// delete the session. The latency loops use these instead of an SDK client so
// that the figures measure the path, not the client library.
import { Pool } from 'undici';
import { relayConnector } from '@switchyard/gateway';

export const LEGACY = '2025-11-25';

/** One way to reach the demo tools: a base `/mcp` URL plus the headers it needs. */
export interface Target {
  readonly name: string;
  readonly url: string;
  readonly headers: Readonly<Record<string, string>>;
  /** A scheduler's `/api/relay/<runtime>` URL: the target is reached on relay connections to it. */
  readonly relay?: string;
}

export interface Session {
  readonly id: string;
  readonly pool: Pool;
  readonly target: Target;
}

const ACCEPT = { 'content-type': 'application/json', accept: 'application/json, text/event-stream' };

/** A pool of `connections` keep-alive connections to the target's origin. */
export function poolFor(target: Target, connections: number): Pool {
  const connect = target.relay ? { connect: relayConnector(new URL(target.relay), 5000) } : {};
  return new Pool(new URL(target.url).origin, { connections, pipelining: 1, ...connect });
}

async function send(
  pool: Pool,
  target: Target,
  body: unknown,
  session?: string,
): Promise<{ status: number; sessionId?: string; text: string }> {
  const res = await pool.request({
    path: new URL(target.url).pathname,
    method: 'POST',
    headers: {
      ...ACCEPT,
      ...target.headers,
      'mcp-protocol-version': LEGACY,
      ...(session ? { 'mcp-session-id': session } : {}),
    },
    body: JSON.stringify(body),
  });
  const text = await res.body.text();
  const sessionId = res.headers['mcp-session-id'];
  return { status: res.statusCode, text, ...(typeof sessionId === 'string' ? { sessionId } : {}) };
}

/** Opens a legacy session (initialize + initialized); throws on any non-2xx. */
export async function openSession(pool: Pool, target: Target): Promise<Session> {
  const init = await send(pool, target, {
    jsonrpc: '2.0',
    id: 0,
    method: 'initialize',
    params: { protocolVersion: LEGACY, capabilities: {}, clientInfo: { name: 'bench', version: '1' } },
  });
  if (init.status !== 200 || !init.sessionId) throw new Error(`${target.name}: initialize ${init.status} ${init.text}`);
  const ack = await send(pool, target, { jsonrpc: '2.0', method: 'notifications/initialized' }, init.sessionId);
  if (ack.status !== 202) throw new Error(`${target.name}: initialized ${ack.status} ${ack.text}`);
  return { id: init.sessionId, pool, target };
}

/** One `tools/call` of `echo`; resolves with its latency in ms, throws unless the text comes back. */
export async function echo(session: Session, n: number): Promise<number> {
  const text = `bench-${n}`;
  const started = performance.now();
  const reply = await send(
    session.pool,
    session.target,
    { jsonrpc: '2.0', id: n, method: 'tools/call', params: { name: 'echo', arguments: { text } } },
    session.id,
  );
  const elapsed = performance.now() - started;
  if (reply.status !== 200 || !reply.text.includes(`"text":"${text}"`)) {
    throw new Error(`${session.target.name}: echo ${reply.status} ${reply.text.slice(0, 200)}`);
  }
  return elapsed;
}

/** Ends a session with DELETE so the runtime frees it; failures are ignored (cleanup only). */
export async function closeSession(session: Session): Promise<void> {
  try {
    const res = await session.pool.request({
      path: new URL(session.target.url).pathname,
      method: 'DELETE',
      headers: { ...session.target.headers, 'mcp-protocol-version': LEGACY, 'mcp-session-id': session.id },
    });
    await res.body.dump();
  } catch {
    // The bench figures do not depend on cleanup.
  }
}
