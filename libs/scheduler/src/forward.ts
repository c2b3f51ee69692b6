import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import https from 'node:https';
import { isIP, type Socket } from 'node:net';
import { FORWARDED_HEADER, HOP_BY_HOP_HEADERS as HOP_BY_HOP } from '@switchyard/protocol';
import { anyPortFetch } from '@switchyard/service';
import { sendJson } from './http-util.ts';

/** Marks a request already forwarded once between replicas, so forwarding never loops. */
export const HOP_HEADER = 'x-switchyard-hop';

/**
 * No cap on sockets per owner: a forwarded request holds its socket until
 * its answer ends, which for an event stream may be hours, and a request
 * past a cap waited in the agent's queue, without a timeout, behind streams
 * that might never end. What bounds them is upstream of here (one socket per
 * request this replica accepted) and at the owner (the runtime's stream
 * limit, answered 503 through this forward). Idle sockets kept: at most
 * FREE_SOCKETS_MAX per owner.
 */
const FREE_SOCKETS_MAX = 256;
const agent = new http.Agent({ keepAlive: true, maxSockets: Infinity, maxFreeSockets: FREE_SOCKETS_MAX });
// Replicas serving TLS themselves advertise https: URLs (node:http refuses those).
const tlsAgent = new https.Agent({ keepAlive: true, maxSockets: Infinity, maxFreeSockets: FREE_SOCKETS_MAX });

/**
 * How long a new connection to the owner may take (TCP, and TLS for
 * `https:`), as the gateway bounds its upstream connects: an owner whose
 * host vanished without a reset drops the SYNs, and the kernel would retry
 * them for about two minutes before the caller got its 502. Only the
 * connect is bounded: a forwarded event stream may then stay silent for hours.
 */
export const FORWARD_CONNECT_TIMEOUT_MS = 5_000;

export interface ForwardOptions {
  /** How long a connect to the owner may take; default FORWARD_CONNECT_TIMEOUT_MS. */
  readonly connectTimeoutMs?: number;
  /** Set on the owner's answer over its headers of the same name. */
  readonly setHeaders?: http.OutgoingHttpHeaders;
  /** The owner's answer headers left out. */
  readonly droppedHeaders?: ReadonlySet<string>;
}

/**
 * Streams a request to another replica and the answer back (one hop),
 * marked FORWARDED_HEADER so a gateway learns to ask for the owner itself. A
 * client disconnect aborts the upstream request; an upstream failure before
 * headers, a connect that took `connectTimeoutMs` among them, is a 502
 * naming the runtime.
 */
export function forwardToReplica(
  req: IncomingMessage,
  res: ServerResponse,
  targetUrl: string,
  runtimeId: string,
  options: ForwardOptions = {},
): void {
  const { connectTimeoutMs = FORWARD_CONNECT_TIMEOUT_MS, setHeaders, droppedHeaders } = options;
  const headers: http.OutgoingHttpHeaders = { [HOP_HEADER]: '1' };
  for (const [name, value] of Object.entries(req.headers)) {
    if (!HOP_BY_HOP.has(name) && value !== undefined) headers[name] = value;
  }
  const secure = targetUrl.startsWith('https:');
  const request = secure ? https.request : http.request;
  // The caller's Host goes on, but TLS is for the owner: Node would take SNI and the name it checks the
  // certificate for from that Host (the name the caller reached this replica by), not from the owner's URL.
  const hostname = new URL(targetUrl).hostname.replace(/^\[|\]$/g, '');
  const tls = secure ? { servername: isIP(hostname) ? '' : hostname } : {};
  const requestOptions = { method: req.method, headers, agent: secure ? tlsAgent : agent, ...tls };
  const upstream = request(targetUrl, requestOptions, (owner) => {
    const relayed = { ...filterHeaders(owner.headers, droppedHeaders), ...setHeaders, [FORWARDED_HEADER]: '1' };
    res.writeHead(owner.statusCode ?? 502, relayed);
    res.flushHeaders();
    owner.pipe(res);
    owner.once('error', () => res.destroy());
  });
  upstream.once('socket', (socket) => boundConnect(socket, secure, connectTimeoutMs));
  upstream.once('error', () => {
    if (!res.headersSent) sendJson(res, 502, { error: 'owner replica unreachable', runtime: runtimeId });
    else res.destroy();
  });
  res.once('close', () => {
    if (!res.writableFinished) upstream.destroy();
  });
  req.pipe(upstream);
}

/** Destroys a socket still connecting after `timeoutMs`; a reused keep-alive socket is already connected. */
function boundConnect(socket: Socket, secure: boolean, timeoutMs: number): void {
  if (!socket.connecting) return;
  const timer = setTimeout(() => {
    const error = Object.assign(new Error(`connect timed out after ${timeoutMs} ms`), { code: 'ETIMEDOUT' });
    socket.destroy(error);
  }, timeoutMs);
  const done = (): void => clearTimeout(timer);
  socket.once(secure ? 'secureConnect' : 'connect', done);
  socket.once('close', done);
}

function filterHeaders(headers: http.IncomingHttpHeaders, dropped?: ReadonlySet<string>): http.OutgoingHttpHeaders {
  const out: http.OutgoingHttpHeaders = {};
  for (const [name, value] of Object.entries(headers)) {
    if (!HOP_BY_HOP.has(name) && !dropped?.has(name) && value !== undefined) out[name] = value;
  }
  return out;
}

/** The agents above, for a URL of either protocol. */
function agentFor(url: URL): http.Agent {
  return url.protocol === 'https:' ? tlsAgent : agent;
}

/**
 * POSTs JSON to another replica (with the caller's API token, if any) and
 * returns status and parsed body. Made with anyPortFetch on the agents of
 * the forward above, not fetch: fetch refuses the ports browsers block
 * (6000, 6665-6669, 10080, …) before it dials, and a leader served on one
 * is a legitimate deployment. A redirect is answered, not followed.
 * `timeoutMs` bounds the whole exchange, body included; a failure to
 * connect, a timeout, an answer cut short and a body that is not JSON all
 * reject.
 */
export async function postJson(
  url: string,
  body: unknown,
  timeoutMs: number,
  authorization?: string,
): Promise<{ status: number; body: unknown }> {
  const headers: Record<string, string> = { 'content-type': 'application/json', [HOP_HEADER]: '1' };
  if (authorization !== undefined) headers.authorization = authorization;
  const answer = await anyPortFetch(url, {
    method: 'POST',
    headers,
    body: JSON.stringify(body),
    redirect: 'manual',
    signal: AbortSignal.timeout(timeoutMs),
    agent: agentFor,
  });
  return { status: answer.status, body: await answer.json() };
}
