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

/**
 * Response headers a browser acts on for the whole origin (or host, or site)
 * they come from, not for the one answer. A sandbox's answer reaches clients
 * from a Switchyard origin (the gateway's, or through `/api/proxy` a
 * scheduler replica's, where the live page is), so none passes on: a
 * sandbox would reach past its own answers. No client needs one from a
 * sandbox: cookies never travel upstream (each hop strips `Cookie`), and the
 * rest describe the origin's server, which is Switchyard's.
 */
export const ORIGIN_WIDE_RESPONSE_HEADERS: ReadonlySet<string> = new Set([
  // A cookie for the host, or with `Domain=` for every host of its site.
  'set-cookie',
  // The withdrawn RFC 2965 form of the same; no current browser reads it, nor should one start here.
  'set-cookie2',
  // Wipes the origin's cookies (for the whole site), storage and cache, signing its users out.
  'clear-site-data',
  // Pins HTTPS on the host (with includeSubDomains, on every host below it) for as long as it says.
  'strict-transport-security',
  // A Network Error Logging policy for the origin: the browser would report its requests there to the
  // collector the sandbox names (`report-to`, whose endpoint groups are kept per origin too).
  'nel',
  'report-to',
  // Other endpoints of the server the client is connected to, which is Switchyard's, not the sandbox's.
  'alt-svc',
]);

/**
 * Largest request header block every hop behind the gateway takes: a
 * scheduler's listener (`/api/proxy`, relay upgrades, HTTP/2 event streams),
 * the tunnel's HTTP/2, and a runtime's relay and direct listeners. Counted
 * as HTTP/2 counts a header list (names, values and 32 bytes a field, RFC
 * 9113 §6.5.2), which is never less than what Node's HTTP/1.1 parser counts
 * (the request target, names and values). The gateway's own limit
 * (`headerBytesMax`) may be higher, for credentials it reads and never
 * forwards; a request whose forwarded headers are past this one it answers
 * 431 itself, so no hop refuses it with a bare 431 instead. Four times
 * Node's default (16 KiB): room for large tokens and cookies of a sandbox's
 * own, while a flood of connections holds a bounded head each.
 */
export const FORWARDED_HEADER_BYTES_MAX = 64 * 1024;

/**
 * Header fields every HTTP/2 hop takes in one request or response (Node's
 * `maxHeaderListPairs`). Node's default, 128, reset the event streams of
 * clients that sent more headers than that, while the HTTP/1.1 hops took
 * them; the gateway bounds a request's headers by size (`headerBytesMax`).
 * HTTP/2 counts 32 bytes per field on top of its name and value (RFC 9113
 * §6.5.2), so a 64 KiB header list holds at most 2,048 fields: the size
 * bound is the one that binds.
 */
export const HTTP2_HEADER_FIELDS_MAX = 2048;

/**
 * The `error` of a scheduler proxy's refusal body `{"error","runtime"}`,
 * which tells a caller what became of its request: `notConnected` (502) —
 * no tunnel to the runtime here, or it died with the request (the runtime
 * is gone); `streamFailed` (502) — the runtime, still connected, reset the
 * stream before answering (it may have acted on the request, so it is not
 * to be resent); `streamsFull` (503, `Retry-After`) — the tunnel carries as
 * many streams as the runtime takes at once, so the request was not sent
 * (an HTTP/2 client would hold it until a stream ends, which an event
 * stream may never do).
 */
export const PROXY_ERRORS = {
  notConnected: 'runtime not connected',
  streamFailed: 'runtime stream failed',
  streamsFull: 'runtime stream limit reached',
} as const;

/**
 * Set on a scheduler proxy's own refusals, to the `error` of their body: a
 * caller tells them from a runtime's answers with the same status by it,
 * without reading a body that may be a sandbox's endless event stream.
 * Runtimes' own answers through a proxy have it stripped; a relay
 * connection's answers, which no proxy reads, are never asked for it.
 */
export const PROXY_ERROR_HEADER = 'x-switchyard-proxy-error';

/**
 * Set on a scheduler proxy's answer that another replica, the one holding
 * the runtime's tunnel, gave: the runtime redialled there (after a restart
 * or a broken connection), and each request that names this replica costs
 * one hop more. A gateway then asks the scheduler where the runtime is now.
 * It only prompts that question, never names a destination: runtimes' own
 * answers through a proxy have it stripped, and one that came through a
 * relay connection unstripped costs a scheduler ask, nothing more.
 */
export const FORWARDED_HEADER = 'x-switchyard-forwarded';

/**
 * A relay connection (protocol.md §7, "Relay connections"): `GET ${RELAY.path}<runtime id>` with
 * `Connection: Upgrade` and `Upgrade: ${RELAY.upgrade}` asks a scheduler
 * replica to carry the connection whole into that runtime's tunnel, where
 * the runtime serves HTTP/1.1 on it.
 */
export const RELAY = {
  path: '/api/relay/',
  upgrade: 'switchyard-relay',
} as const;

/**
 * The realms of the `WWW-Authenticate` challenges with which Switchyard's own
 * servers refuse a gateway's token: a scheduler its API token (scheduler
 * `apiTokens`), a runtime's direct listener its upstream token. A gateway
 * tells those 401s apart from any a sandbox answers, which pass through.
 */
export const SCHEDULER_API_REALM = 'switchyard-scheduler';
export const RUNTIME_DIRECT_REALM = 'switchyard-runtime';

/**
 * True when a `WWW-Authenticate` value names SCHEDULER_API_REALM or
 * RUNTIME_DIRECT_REALM in any form (any case, quoted or not): a runtime's
 * answer that does poses as Switchyard refusing a gateway's token, so a
 * scheduler proxy drops that header from it. Broader than what a gateway
 * takes for a refusal, so that nothing a gateway of any release takes for
 * one gets through.
 */
export function namesSwitchyardRealm(challenge: string | readonly string[]): boolean {
  const text = (typeof challenge === 'string' ? challenge : challenge.join(',')).toLowerCase();
  return text.includes(SCHEDULER_API_REALM) || text.includes(RUNTIME_DIRECT_REALM);
}
