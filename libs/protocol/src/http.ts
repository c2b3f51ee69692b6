/**
 * Hop-by-hop headers (RFC 9110 §7.6.1, with the legacy `proxy-connection`):
 * they describe one connection, so no proxy on the way — gateway, scheduler
 * forward, tunnel — passes them on. Each hop adds what its own client or
 * protocol computes itself (`host`, `content-length`, HTTP/2's
 * `http2-settings`), and drops what `Connection` names.
 */
export const HOP_BY_HOP_HEADERS: ReadonlySet<string> = new Set([
  'connection',
  'keep-alive',
  'proxy-authenticate',
  'proxy-authorization',
  'proxy-connection',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
]);
