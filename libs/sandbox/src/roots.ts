import { ProtocolError, ProtocolErrorCode } from '@modelcontextprotocol/client';
import type { McpServer, RequestOptions } from '@modelcontextprotocol/server';
import { hasEventStream } from './session-transport.ts';

/**
 * Asks the client behind `server` for its roots. A client that declared no
 * `roots` is not asked (the spec forbids it): refused with the error a
 * client without them answers, method not found. Legacy sessions only: a
 * 2026-07-28 call takes the request in its next round (see CallRounds).
 */
export async function rootsOf(server: McpServer, options: RequestOptions) {
  if (!server.server.getClientCapabilities()?.roots) {
    throw new ProtocolError(ProtocolErrorCode.MethodNotFound, 'Method not found');
  }
  return server.server.listRoots(undefined, options);
}

/**
 * Whom an upstream's `roots/list` goes to when no call of the sandbox is in
 * flight to carry it: the sandbox's one legacy session, over its GET stream,
 * as a server connected to that client directly would ask. Several sessions
 * share a named process's sandbox, each client with its own roots, and
 * nothing tells whose the upstream wants: refused, as with none. So is a
 * session with no GET stream open, which the request could not reach: its
 * sender would wait its whole timeout (a client that resumes its stream
 * later is not asked then).
 */
export function sessionToAsk(servers: Iterable<McpServer>): McpServer {
  const sessions = [...servers].filter((s) => s.isConnected() && s.server.transport?.sessionId !== undefined);
  const unreachable = (why: string) => new ProtocolError(ProtocolErrorCode.InternalError, why);
  if (sessions.length > 1) {
    throw unreachable(
      `no call in flight, and ${sessions.length} sessions share this sandbox: whose roots is not known`,
    );
  }
  const [session] = sessions;
  if (!session) throw unreachable('no client to ask: no call in flight and no session on this sandbox');
  if (!hasEventStream(session)) {
    throw unreachable('no client to ask: no call in flight and the session has no GET stream open to carry it');
  }
  return session;
}
