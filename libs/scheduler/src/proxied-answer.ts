/**
 * The header rules of a runtime's answer that `/api/proxy` relays. A runtime
 * holds only a join token, but its answers come from this replica's origin,
 * the live page's, to which a browser sends its API credentials. Everything
 * else of the answer (status, other headers, body) passes unchanged.
 */

/**
 * Set on every relayed answer, over any the runtime sent: as a document, one
 * renders sandboxed (a unique origin, no script) and is never sniffed into
 * another type.
 */
export const PROXIED_RESPONSE_HEADERS = { 'content-security-policy': 'sandbox', 'x-content-type-options': 'nosniff' };

/**
 * Left out of every relayed answer: headers a browser acts on for the whole
 * origin (or host, or site), not for the one answer, so a runtime would
 * reach past its own paths, sandbox or not. No client of the proxy needs them
 * from a runtime: a gateway speaks for itself to its own clients.
 */
export const PROXIED_RESPONSE_HEADERS_DROPPED: ReadonlySet<string> = new Set([
  // A cookie for the replica's host, or with `Domain=` for every host of its site.
  'set-cookie',
  // The withdrawn RFC 2965 form of the same; no current browser reads it, nor should one start here.
  'set-cookie2',
  // Wipes the origin's cookies (for the whole site), storage and cache, signing an operator out.
  'clear-site-data',
  // Pins HTTPS on the host (with includeSubDomains, on every host below it) for as long as it says.
  'strict-transport-security',
  // A Network Error Logging policy for the origin: the browser would report its requests there to the
  // collector the runtime names (`report-to`, whose endpoint groups are kept per origin too).
  'nel',
  'report-to',
  // Other endpoints of the server the client is connected to, which is this replica, not the runtime.
  'alt-svc',
]);
