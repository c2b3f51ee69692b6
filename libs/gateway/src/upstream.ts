import type { IncomingHttpHeaders } from 'node:http';
import type { Response } from 'express';
import type { Dispatcher } from 'undici';
import { IDENTITY_HEADERS } from '@switchyard/protocol';

/** Hop-by-hop headers (RFC 9110 §7.6.1) plus those undici computes itself. */
const HOP_BY_HOP = new Set([
  'connection',
  'keep-alive',
  'proxy-authenticate',
  'proxy-authorization',
  'proxy-connection',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
  'host',
  'content-length',
  'expect',
]);

/** Never forwarded upstream: credentials, and identity headers only the gateway may set. */
const STRIPPED_UPSTREAM = new Set(['authorization', 'cookie', 'forwarded', 'x-forwarded-for']);

/** Connect-phase failures: the request never left this process, so a retry replays nothing. */
const CONNECT_ERROR_CODES = new Set([
  'ECONNREFUSED',
  'UND_ERR_CONNECT_TIMEOUT',
  'UND_ERR_CONNECT',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'EADDRNOTAVAIL',
]);

export function isConnectFailure(error: unknown): boolean {
  let e = error as { code?: unknown; cause?: unknown } | undefined;
  for (let depth = 0; e && depth < 3; depth++, e = e.cause as typeof e) {
    if (typeof e.code === 'string' && CONNECT_ERROR_CODES.has(e.code)) return true;
  }
  return false;
}

function connectionListed(headers: IncomingHttpHeaders): Set<string> {
  const listed = new Set<string>();
  const value = headers.connection;
  if (typeof value === 'string') for (const t of value.split(',')) listed.add(t.trim().toLowerCase());
  return listed;
}

/** What the gateway asserts to the runtime (design brief §10). */
export interface AssertedHeaders {
  readonly class: string;
  readonly process: string;
  readonly sessionId?: string;
  readonly principal?: string;
}

/**
 * Client headers as the runtime may see them: hop-by-hop, credentials and
 * every client `X-Switchyard-*` removed, then the gateway's own identity
 * headers set from the resolved identity.
 */
export function upstreamHeaders(headers: IncomingHttpHeaders, asserted: AssertedHeaders): Record<string, string> {
  const listed = connectionListed(headers);
  const out: Record<string, string> = {};
  for (const [name, value] of Object.entries(headers)) {
    if (value === undefined || HOP_BY_HOP.has(name) || STRIPPED_UPSTREAM.has(name) || listed.has(name)) continue;
    if (name.startsWith('x-switchyard-')) continue;
    out[name] = Array.isArray(value) ? value.join(', ') : value;
  }
  out[IDENTITY_HEADERS.class] = asserted.class;
  out[IDENTITY_HEADERS.process] = asserted.process;
  if (asserted.sessionId !== undefined) out[IDENTITY_HEADERS.sessionId] = asserted.sessionId;
  if (asserted.principal !== undefined) out[IDENTITY_HEADERS.principal] = asserted.principal;
  return out;
}

/** Upstream response headers a client may see. */
function downstreamHeaders(headers: IncomingHttpHeaders): Record<string, string | string[]> {
  const listed = connectionListed(headers);
  const out: Record<string, string | string[]> = {};
  for (const [name, value] of Object.entries(headers)) {
    if (value === undefined || listed.has(name)) continue;
    if (HOP_BY_HOP.has(name) && name !== 'content-length') continue;
    out[name] = value;
  }
  return out;
}

export interface UpstreamCall {
  readonly url: string;
  readonly method: 'GET' | 'POST' | 'DELETE';
  readonly headers: Record<string, string>;
  readonly body?: Buffer;
  readonly signal: AbortSignal;
  readonly idleTimeoutMs: number;
}

export type UpstreamResponse = Dispatcher.ResponseData;

/** Sends one request; rejects with undici's error (see isConnectFailure). */
export function callUpstream(dispatcher: Dispatcher, call: UpstreamCall): Promise<UpstreamResponse> {
  const url = new URL(call.url);
  return dispatcher.request({
    origin: url.origin,
    path: url.pathname + url.search,
    method: call.method,
    headers: call.headers,
    ...(call.body ? { body: call.body } : {}),
    signal: call.signal,
    headersTimeout: call.idleTimeoutMs,
    // Event streams may be silent for as long as a tool runs; the idle timer
    // in relayResponse covers every other body.
    bodyTimeout: 0,
  });
}

export function isEventStream(upstream: UpstreamResponse): boolean {
  const type = upstream.headers['content-type'];
  return typeof type === 'string' && type.toLowerCase().startsWith('text/event-stream');
}

/**
 * Holds the client socket corked from a chunk's arrival to the end of that
 * turn of the event loop, so what arrived together leaves in one write: a
 * response read whole from upstream (headers, event, terminating chunk) was
 * two writes and two wake-ups of the client. Later chunks still leave the
 * same turn they arrive; `end()` uncorks fully by itself.
 */
function coalesceWrites(body: UpstreamResponse['body'], res: Response): void {
  let corked = false;
  const release = (): void => {
    corked = false;
    const socket = res.socket;
    if (!res.writableEnded && socket && !socket.destroyed && socket.writableCorked > 0) socket.uncork();
  };
  // Registered before pipe's own listener, so the cork is in place for its write.
  body.on('data', () => {
    if (corked) return;
    corked = true;
    // The socket, not `res`: a corked response buffers chunks apart and its
    // end() would then write the terminating chunk ahead of them.
    res.socket?.cork();
    setImmediate(release);
  });
}

/**
 * Pipes `body` into `res`; resolves true once `res` finished, false when
 * either side broke first (both are then destroyed). Plain `pipe` plus two
 * listeners: `stream.pipeline` allocates an AbortController per call and
 * aborts it on completion (a DOMException with a stack each time), which
 * profiling showed as a few percent of the gateway's CPU per request.
 */
function pipeBody(body: UpstreamResponse['body'], res: Response): Promise<boolean> {
  return new Promise((resolve) => {
    let settled = false;
    const settle = (complete: boolean): void => {
      if (settled) return;
      settled = true;
      if (!complete) {
        body.unpipe(res);
        body.destroy();
        if (!res.destroyed) res.destroy();
      }
      resolve(complete);
    };
    // Kept after settling: a late error on a destroyed body must not go unhandled.
    body.on('error', () => settle(false));
    // 'close' follows 'finish' on success, and comes alone when the client went away.
    res.once('close', () => settle(res.writableFinished));
    coalesceWrites(body, res);
    body.pipe(res);
  });
}

/**
 * Streams the upstream response to the client without buffering. SSE gets
 * `X-Accel-Buffering: no` and its headers out before the first event (with
 * it when that event is already here, else at the next turn of the loop);
 * other bodies are cut after `idleTimeoutMs` without a byte. Resolves when
 * the relay ends; never rejects (a broken stream is cut, its headers being
 * already sent).
 */
export async function relayResponse(
  upstream: UpstreamResponse,
  res: Response,
  idleTimeoutMs: number,
  extraHeaders: Readonly<Record<string, string>> = {},
): Promise<'complete' | 'broken'> {
  const sse = isEventStream(upstream);
  res.status(upstream.statusCode);
  for (const [name, value] of Object.entries(downstreamHeaders(upstream.headers))) res.setHeader(name, value);
  for (const [name, value] of Object.entries(extraHeaders)) res.setHeader(name, value);
  let idle: NodeJS.Timeout | undefined;
  if (sse) {
    res.setHeader('x-accel-buffering', 'no');
    res.removeHeader('content-length');
    // Flushing at once cost a socket write of its own per response; a stream
    // that stays silent (a GET stream, a long tool call) still gets its
    // headers after this turn, so the client is never kept waiting.
    setImmediate(() => {
      if (!res.headersSent && !res.destroyed) res.flushHeaders();
    });
  } else {
    const arm = (): void => {
      clearTimeout(idle);
      idle = setTimeout(() => upstream.body.destroy(new Error('upstream idle timeout')), idleTimeoutMs);
      idle.unref();
    };
    arm();
    upstream.body.on('data', arm);
  }
  try {
    return (await pipeBody(upstream.body, res)) ? 'complete' : 'broken';
  } finally {
    clearTimeout(idle);
  }
}

/** Drains and discards an upstream body we answer for ourselves. */
export async function discard(upstream: UpstreamResponse): Promise<void> {
  try {
    await upstream.body.dump({ limit: 64 * 1024 });
  } catch {
    upstream.body.destroy();
  }
}
