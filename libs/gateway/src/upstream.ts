import type { IncomingHttpHeaders, OutgoingHttpHeaders } from 'node:http';
import {
  FORWARDED_HEADER,
  HOP_BY_HOP_HEADERS,
  IDENTITY_HEADERS,
  ORIGIN_WIDE_RESPONSE_HEADERS,
  PROXY_ERRORS,
  PROXY_ERROR_HEADER,
} from '@switchyard/protocol';
import { CORS_RESPONSE_HEADERS, mergedVary } from './cors.ts';
import { UPSTREAM_SILENT_NOT_DIALLED } from './upstream-checks.ts';

/**
 * Hop-by-hop headers plus those undici computes itself, and `HTTP2-Settings`
 * (connection-specific: HTTP/2 refuses to send it, failing an event stream).
 */
const HOP_BY_HOP = new Set([...HOP_BY_HOP_HEADERS, 'host', 'content-length', 'expect', 'http2-settings']);

/** Never forwarded upstream: credentials, and identity headers only the gateway may set. */
const STRIPPED_UPSTREAM = new Set(['authorization', 'cookie', 'forwarded', 'x-forwarded-for']);

/**
 * Never relayed to clients: what a scheduler tells this gateway alone, CORS, which is the gateway's, and what a
 * sandbox would set for the gateway's whole origin (its cookies could never come back to it anyway).
 */
const STRIPPED_DOWNSTREAM = new Set([FORWARDED_HEADER, ...CORS_RESPONSE_HEADERS, ...ORIGIN_WIDE_RESPONSE_HEADERS]);

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
  UPSTREAM_SILENT_NOT_DIALLED,
]);

/** True for a response head that did not come in time (undici's code; the HTTP/2 client uses it too). */
export function isHeadersTimeout(error: unknown): boolean {
  return (error as { code?: unknown } | undefined)?.code === 'UND_ERR_HEADERS_TIMEOUT';
}

/** True when `error` or one of its first causes carries a code `matches` accepts (undici wraps socket errors). */
export function hasCode(error: unknown, matches: (code: string) => boolean): boolean {
  let e = error as { code?: unknown; cause?: unknown } | undefined;
  for (let depth = 0; e && depth < 3; depth++, e = e.cause as typeof e) {
    if (typeof e.code === 'string' && matches(e.code)) return true;
  }
  return false;
}

export function isConnectFailure(error: unknown): boolean {
  return hasCode(error, (code) => CONNECT_ERROR_CODES.has(code));
}

/**
 * Codes of a TLS handshake that failed: a certificate not trusted, expired
 * or for another name, or a peer that does not speak TLS.
 */
const TLS_ERROR_CODE = /^(ERR_TLS_|ERR_SSL_|CERT_|UNABLE_TO_|DEPTH_ZERO_SELF_SIGNED_CERT$|SELF_SIGNED_CERT_IN_CHAIN$)/;

/** A TLS handshake that failed: no request byte left, and only configuration mends it (a retry would not). */
export function isTlsFailure(error: unknown): boolean {
  return hasCode(error, (code) => TLS_ERROR_CODE.test(code));
}

const NOTHING_LISTED: ReadonlySet<string> = new Set();

/**
 * Header names a `Connection` header lists (hop-by-hop by declaration). The
 * value nearly every request and answer carries, `keep-alive`, names only a
 * header dropped anyway (HOP_BY_HOP): no set is built for it.
 */
function connectionListed(headers: IncomingHttpHeaders): ReadonlySet<string> {
  const value = headers.connection;
  if (typeof value !== 'string' || value === 'keep-alive') return NOTHING_LISTED;
  const listed = new Set<string>();
  for (const t of value.split(',')) listed.add(t.trim().toLowerCase());
  return listed;
}

/** What the gateway asserts to the runtime (design brief §10). */
export interface AssertedHeaders {
  readonly class: string;
  /**
   * The process the request named, undefined when it named none: the
   * runtime then gives it a sandbox of its own (the session's, or the
   * stateless request's), which it destroys as soon as that ends. Asserted
   * as the thread, which nobody names again, it would be held for its class's
   * expireSeconds, filling the runtime with sandboxes nobody can reach.
   */
  readonly process: string | undefined;
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
  for (const name in headers) {
    const value = headers[name];
    if (value === undefined || HOP_BY_HOP.has(name) || STRIPPED_UPSTREAM.has(name) || listed.has(name)) continue;
    if (name.startsWith('x-switchyard-')) continue;
    out[name] = Array.isArray(value) ? value.join(', ') : value;
  }
  out[IDENTITY_HEADERS.class] = asserted.class;
  if (asserted.process !== undefined) out[IDENTITY_HEADERS.process] = asserted.process;
  if (asserted.sessionId !== undefined) out[IDENTITY_HEADERS.sessionId] = asserted.sessionId;
  if (asserted.principal !== undefined) out[IDENTITY_HEADERS.principal] = asserted.principal;
  return out;
}

/** What HTTP/2 counts for each field of a header list on top of its name and value (RFC 9113 §6.5.2). */
const HTTP2_FIELD_OVERHEAD_BYTES = 32;
/** The pseudo-header fields of an HTTP/2 request, whose values `url` and the method hold between them. */
const PSEUDO_HEADER_BYTES = [':method', ':scheme', ':authority', ':path'].reduce(
  (sum, name) => sum + name.length + HTTP2_FIELD_OVERHEAD_BYTES,
  0,
);

/**
 * The size of a request to `url` with `headers` as the hops behind the
 * gateway count it against FORWARDED_HEADER_BYTES_MAX: as an HTTP/2 header
 * list, pseudo-headers included. Never less than what an HTTP/1.1 hop
 * counts (the request target, names and values).
 */
export function forwardedHeaderBytes(method: string, url: string, headers: Readonly<Record<string, string>>): number {
  let total = PSEUDO_HEADER_BYTES + method.length + url.length;
  for (const name in headers) total += name.length + headers[name]!.length + HTTP2_FIELD_OVERHEAD_BYTES;
  return total;
}

/**
 * The upstream response headers a client may see, as one object for
 * `res.writeHead`, so the response keeps no header map of its own (which
 * `setHeader` would build, and hold as long as an event stream stays open).
 * An event stream loses its length and gains `X-Accel-Buffering: no`. A
 * `Vary` of the upstream's is merged into `ownVary` (the gateway's, set
 * already on the response), which `writeHead` would otherwise replace.
 */
export function downstreamHeaders(
  headers: IncomingHttpHeaders,
  eventStream: boolean,
  ownVary?: number | string | readonly string[],
): OutgoingHttpHeaders {
  const listed = connectionListed(headers);
  const out: OutgoingHttpHeaders = {};
  for (const name in headers) {
    const value = headers[name];
    if (value === undefined || listed.has(name) || STRIPPED_DOWNSTREAM.has(name)) continue;
    if (HOP_BY_HOP.has(name) && (name !== 'content-length' || eventStream)) continue;
    out[name] = value;
  }
  if (eventStream) out['x-accel-buffering'] = 'no';
  if (ownVary !== undefined && out.vary !== undefined) out.vary = mergedVary(ownVary, out.vary);
  return out;
}

/** True for an answer a scheduler replica forwarded from the replica that holds the runtime's tunnel now. */
export function wasForwarded(headers: IncomingHttpHeaders): boolean {
  return headers[FORWARDED_HEADER] !== undefined;
}

/** What a gateway logs (at error level) when a scheduler refuses its API token. */
export const SCHEDULER_TOKEN_REFUSED =
  "scheduler refused this gateway's API token: set schedulerToken (or schedulerTokenFile) to one of the schedulers' apiTokens";
/** What a gateway logs (at error level) when a runtime's direct listener refuses its token. */
export const RUNTIME_TOKEN_REFUSED =
  "runtime refused this gateway's upstream token: set upstreamToken (or upstreamTokenFile) to one of the runtimes' directListen tokens";

/**
 * True for a 401 with which a scheduler (`realm` SCHEDULER_API_REALM) or a
 * runtime's direct listener (RUNTIME_DIRECT_REALM) refuses this gateway's
 * own token; a sandbox's 401 passes through to the client. A runtime cannot
 * pose as a scheduler so: a scheduler proxy drops such a challenge from its
 * answers, and a relay's answers are never asked (see `call`).
 */
export function refusedGatewayToken(status: number, headers: IncomingHttpHeaders, realm: string): boolean {
  if (status !== 401) return false;
  const challenge = headers['www-authenticate'];
  return String(challenge ?? '').includes(`realm="${realm}"`);
}

/** True for a scheduler proxy's 503 saying the runtime's tunnel is full; a runtime's own 503 passes through. */
export function isStreamsFullAnswer(status: number, headers: IncomingHttpHeaders): boolean {
  return status === 503 && headers[PROXY_ERROR_HEADER] === PROXY_ERRORS.streamsFull;
}

/** True for `text/event-stream` responses (SSE: no idle timeout, headers flushed early). */
export function isEventStream(headers: IncomingHttpHeaders): boolean {
  const type = headers['content-type'];
  return typeof type === 'string' && type.toLowerCase().startsWith('text/event-stream');
}
