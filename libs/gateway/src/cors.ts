import type { IncomingMessage, ServerResponse } from 'node:http';

/**
 * CORS for browser-based MCP clients on the origins `allowedOrigins` lists
 * (others are answered 403 before this). A page on another origin than the
 * gateway sends JSON and `Mcp-Session-Id` (neither is a "simple" request),
 * so its browser asks first with a preflight `OPTIONS`, and then reads only
 * the answers, and the response headers, that the gateway lets it.
 *
 * Bearer tokens travel in `Authorization`, not cookies, so credentials mode
 * (`Access-Control-Allow-Credentials`) is not needed and not offered.
 */

/** What a page may read of an answer beyond the basics: the session, its protocol, a 401's or 403's challenge. */
const EXPOSED_HEADERS = 'Mcp-Session-Id, Mcp-Protocol-Version, WWW-Authenticate, Retry-After';
const ALLOWED_METHODS = 'GET, POST, DELETE';
/** How long a browser may reuse a preflight's answer (browsers cap it: Chromium at 2 h, Firefox at 24 h). */
const PREFLIGHT_MAX_AGE_SECONDS = '600';

/** Upstream answers' CORS headers: the gateway's policy is the only one a page sees. */
export const CORS_RESPONSE_HEADERS: readonly string[] = [
  'access-control-allow-origin',
  'access-control-allow-credentials',
  'access-control-expose-headers',
  'access-control-allow-methods',
  'access-control-allow-headers',
  'access-control-max-age',
];

/** Lets the page of `origin` (already allowed) read this answer, whatever its status. */
export function allowOrigin(res: ServerResponse, origin: string): void {
  res.setHeader('access-control-allow-origin', origin);
  res.setHeader('access-control-expose-headers', EXPOSED_HEADERS);
  res.setHeader('vary', 'Origin');
}

/**
 * One `Vary` for an answer whose `own` (the gateway's, `Origin` for CORS)
 * and `upstream` values both hold: each field once, compared without case
 * and spelled as first seen, the gateway's first; `*` alone if either says
 * it (RFC 9110 §12.5.5), as the answer then varies on more than fields.
 * Either may be a list of lines, as Node gives repeated headers.
 */
export function mergedVary(own: number | string | readonly string[], upstream: string | readonly string[]): string {
  const fields = new Map<string, string>();
  for (const line of [own, upstream].flat()) {
    for (const part of String(line).split(',')) {
      const field = part.trim();
      if (field === '*') return '*';
      if (field && !fields.has(field.toLowerCase())) fields.set(field.toLowerCase(), field);
    }
  }
  return [...fields.values()].join(', ');
}

/** A CORS preflight: `OPTIONS` naming the method the page means to send. */
export function isPreflight(req: IncomingMessage): boolean {
  return req.method === 'OPTIONS' && req.headers['access-control-request-method'] !== undefined;
}

/**
 * Answers a preflight from an allowed origin: 204 with the methods `/mcp`
 * serves and the request headers the page asked for. Those are allowed as
 * asked: the gateway strips what a client may not set (credentials other
 * than `Authorization`, its own `X-Switchyard-*`) whoever sends them.
 */
export function answerPreflight(req: IncomingMessage, res: ServerResponse, origin: string): void {
  allowOrigin(res, origin);
  const asked = req.headers['access-control-request-headers'];
  res.writeHead(204, {
    'access-control-allow-methods': ALLOWED_METHODS,
    ...(asked ? { 'access-control-allow-headers': asked } : {}),
    'access-control-max-age': PREFLIGHT_MAX_AGE_SECONDS,
    vary: 'Origin, Access-Control-Request-Method, Access-Control-Request-Headers',
  });
  res.end();
}
