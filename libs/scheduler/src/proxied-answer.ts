import { ORIGIN_WIDE_RESPONSE_HEADERS } from '@switchyard/protocol';

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
 * Left out of every relayed answer: the headers a browser acts on for the
 * whole origin, which here is the live page's.
 */
export const PROXIED_RESPONSE_HEADERS_DROPPED: ReadonlySet<string> = ORIGIN_WIDE_RESPONSE_HEADERS;
