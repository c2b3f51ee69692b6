import type { IncomingHttpHeaders, OutgoingHttpHeaders } from 'node:http';
import { FORWARDED_HEADER, HOP_BY_HOP_HEADERS, PROXY_ERROR_HEADER, namesSwitchyardRealm } from '@switchyard/protocol';

/**
 * Headers that must not cross the tunnel: hop-by-hop ones, those HTTP/2
 * forbids outright, and FORWARDED_HEADER and PROXY_ERROR_HEADER, which only
 * a scheduler sets (a runtime's answer never carries them on: with the
 * latter a runtime would pass its 503 for a full tunnel, its 502 for a
 * lost one).
 */
const HOP_BY_HOP = new Set([...HOP_BY_HOP_HEADERS, 'http2-settings', 'host', FORWARDED_HEADER, PROXY_ERROR_HEADER]);

const NO_TOKENS: ReadonlySet<string> = new Set();

/** True when `name` (lower case) may be forwarded to the next hop. */
export function isEndToEnd(name: string, connectionTokens: ReadonlySet<string> = NO_TOKENS): boolean {
  return !HOP_BY_HOP.has(name) && !name.startsWith('proxy-') && !name.startsWith(':') && !connectionTokens.has(name);
}

/**
 * True for a runtime answer's header that poses as Switchyard refusing a
 * gateway's token: a `WWW-Authenticate` naming one of its realms
 * (`namesSwitchyardRealm`). A proxy drops it, so a gateway never takes a
 * runtime's 401 for its scheduler refusing its API token (and logs the
 * wrong cause); the 401 itself passes, as any other answer of the runtime.
 */
export function posesAsSwitchyard(name: string, value: string | readonly string[]): boolean {
  return name === 'www-authenticate' && namesSwitchyardRealm(value);
}

/** Header names the `Connection` header marks as hop-by-hop for this hop. */
export function connectionTokens(headers: IncomingHttpHeaders): ReadonlySet<string> {
  const value = headers.connection;
  if (value === undefined) return NO_TOKENS;
  const tokens = new Set<string>();
  for (const token of (Array.isArray(value) ? value.join(',') : (value ?? '')).split(',')) {
    const name = token.trim().toLowerCase();
    if (name) tokens.add(name);
  }
  return tokens;
}

/** Copies the end-to-end headers of an HTTP/1.1 request or HTTP/2 response. */
export function endToEndHeaders(headers: IncomingHttpHeaders): OutgoingHttpHeaders {
  const tokens = connectionTokens(headers);
  const out: OutgoingHttpHeaders = {};
  for (const name in headers) {
    const value = headers[name];
    if (value !== undefined && isEndToEnd(name, tokens)) out[name] = value;
  }
  return out;
}

/** The end-to-end headers of a runtime's answer, less any that poses as Switchyard's (`posesAsSwitchyard`). */
export function answerHeaders(headers: IncomingHttpHeaders): OutgoingHttpHeaders {
  const out = endToEndHeaders(headers);
  const challenge = out['www-authenticate'];
  if (challenge !== undefined && posesAsSwitchyard('www-authenticate', String(challenge))) {
    delete out['www-authenticate'];
  }
  return out;
}

/**
 * The headers of the tunnel stream a proxied request becomes: its
 * end-to-end headers, the caller's `extra` over them, the pseudo-headers,
 * and `TE: trailers` when the client accepts trailers.
 */
export function tunnelRequestHeaders(
  incoming: IncomingHttpHeaders,
  target: { readonly method: string; readonly path: string; readonly authority: string },
  extra?: OutgoingHttpHeaders,
): OutgoingHttpHeaders {
  const headers = endToEndHeaders(incoming);
  if (extra) Object.assign(headers, extra);
  headers[':method'] = target.method;
  headers[':path'] = target.path;
  headers[':authority'] = target.authority;
  if (allowsTrailers(incoming)) headers.te = 'trailers';
  return headers;
}

/** `TE: trailers` is the one TE value HTTP/2 allows; anything else is dropped. */
function allowsTrailers(headers: IncomingHttpHeaders): boolean {
  const te = headers.te;
  return typeof te === 'string' && te.split(',').some((t) => t.trim().toLowerCase() === 'trailers');
}
