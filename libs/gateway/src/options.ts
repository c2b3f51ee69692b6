import type { Registry } from 'prom-client';
import { DEFAULT_CLASS, SwitchyardError, isIdentityValue } from '@switchyard/protocol';
import { systemClock } from '@switchyard/clock';
import type { Clock } from '@switchyard/clock';
import { redisUrlProblem } from '@switchyard/service';
import { OriginPolicy } from './origins.ts';
import { REDIS_ROUTE_PREFIX } from './route-cache.ts';
import { TrustedProxies } from './client-address.ts';
import { JWT_ALGORITHMS, JWT_CLAIM_NAME, type JwtAlgorithm } from './jwt-claims.ts';
import { SCHEDULER_TOKEN, UPSTREAM_TOKEN, checkToken } from './token-header.ts';
import type { TokenRule } from './token-header.ts';

/** Minimal pino-compatible logger; the gateway never passes secrets to it. */
export interface GatewayLogger {
  info(obj: object, msg?: string): void;
  warn(obj: object, msg?: string): void;
  error(obj: object, msg?: string): void;
  debug(obj: object, msg?: string): void;
}

/** Identity strategies per part, each a chain tried in order (first value wins). */
export interface IdentityOptions {
  /** Default `['path:class', 'header:X-Switchyard-Class', 'default:<defaultClass>']` (path on `/mcp/:class/:process`). */
  readonly class?: readonly string[];
  /** Default `['path:process', 'header:X-Switchyard-Process']`; when the chain yields nothing, process = thread. */
  readonly process?: readonly string[];
  /**
   * Thread of a stateless request. Default `['random']` (a fresh id per request).
   * A legacy session's thread is always its `Mcp-Session-Id`.
   */
  readonly thread?: readonly string[];
}

export interface RouteCacheOptions {
  /** Entries kept in memory. Default 100_000. */
  readonly maxEntries?: number;
  /** Time to live, renewed on use (in Redis too, at most every quarter of it). Default 15 min. */
  readonly ttlMs?: number;
  /**
   * Shared cache for gateway replicas, off when absent:
   * `redis[s]://[user:password@]host[:port][/db]`, checked by `redisUrlProblem`.
   */
  readonly redisUrl?: string;
  /**
   * Prefix of every key in Redis. Default `switchyard:route:`. Deployments
   * that share one Redis (and database) need one each: a named sandbox's key
   * is the same in both, and one would send its requests to the other's
   * runtimes. 1-64 visible ASCII characters.
   */
  readonly redisKeyPrefix?: string;
}

export interface AuthOptions {
  readonly mode: 'none' | 'bearer' | 'jwt';
  /**
   * Accepted static tokens (`bearer`); a function is asked on every request
   * (e.g. a file read again when it changes), and what it returns is hashed
   * again only when it returns another list. A function's list is also
   * looked at every second while requests are open: those of a token it no
   * longer lists (an event stream, a long call) are ended, and a warning
   * says how many. An empty list ends none (it refuses new requests).
   */
  readonly tokens?: readonly string[] | (() => readonly string[]);
  /**
   * JWKS endpoint (`jwt`). A request admitted on a JWT is ended at the
   * token's `exp`, past the clock tolerance verification allows
   * (GATEWAY_DEFAULTS.jwtClockToleranceMs), on the gateway's clock: an
   * event stream does not outlive its token.
   */
  readonly jwksUrl?: string;
  readonly issuer?: string;
  /**
   * `jwt`: the audiences a token's `aud` must name one of (jose's check):
   * one, or several for a deployment reachable under more than one name, or
   * moving from one audience to another. None empty, and a list not empty.
   * Without it, see `resource`. The metadata serves `resource` alone.
   */
  readonly audience?: string | readonly string[];
  /**
   * `jwt`: least time between JWKS fetches for a `kid` the cached set
   * lacks, so a rotated key is taken at most this long after its first
   * token, and tokens with made-up `kid`s cost one fetch per interval.
   * Default GATEWAY_DEFAULTS.jwksCooldownMs.
   */
  readonly jwksCooldownMs?: number;
  /**
   * `jwt`: after a failed JWKS fetch, how long none is tried again
   * (requests meanwhile get 503, or the keys held while the set is fresh).
   * Default GATEWAY_DEFAULTS.jwksRetryMs.
   */
  readonly jwksRetryMs?: number;
  /**
   * `jwt`: what MCP clients discover through the gateway's OAuth 2.0
   * Protected Resource Metadata (RFC 9728): the canonical URL of `/mcp` as
   * clients reach it (default: from each request's Host and
   * X-Forwarded-Proto), the authorization servers that issue its tokens
   * (default: `issuer`, when it is a URL) and the scopes to ask for.
   * Without `audience`, a token's `aud` must name `resource`, as written or
   * as the metadata serves it (`new URL(resource).href`).
   */
  readonly resource?: string;
  readonly authorizationServers?: readonly string[];
  readonly scopes?: readonly string[];
  /**
   * `jwt`: the top-level claim that names the principal, a non-empty
   * string (e.g. `client_id` or `azp` for client-credential tokens, `email`);
   * a token without it is refused (401). A value that is not an identity
   * value travels as `<claim>:<hash>` (`claim:<hash>` for a claim name that
   * is not one). Default GATEWAY_DEFAULTS.jwtPrincipalClaim.
   */
  readonly principalClaim?: string;
  /**
   * `jwt`: the JWS algorithms a token may be signed with, from
   * JWT_ALGORITHMS; a token of another is refused (401) before any key is
   * looked up. Default GATEWAY_DEFAULTS.jwtAlgorithms.
   */
  readonly algorithms?: readonly JwtAlgorithm[];
  /**
   * `jwt`: take only RFC 9068 access tokens, whose header says `typ:
   * at+jwt` (`application/at+jwt`, in any case): an ID token or another JWT
   * the issuer signs for the same audience is refused (401). Default false:
   * many providers set another `typ` (`JWT`) or none.
   */
  readonly requireAccessTokenType?: boolean;
  /**
   * `jwt`: scopes a token must grant, every one (see grantedScopes); a valid
   * token without them is refused with 403 insufficient_scope, naming them,
   * so that an MCP client asks for them (MCP authorization's step-up).
   * Each must be one of `scopes` when that is set; without it, clients are
   * told to ask for these. Default none. `scopes` alone is not enforced: it
   * may name scopes access tokens do not carry (`offline_access`).
   */
  readonly requiredScopes?: readonly string[];
  /**
   * `jwt`: per class, the scopes a token must grant, every one, for a
   * request served by that class (see ClassScopes): a legacy session's
   * requests by the class it was opened to, whatever class they name; a
   * stateless request by the class it names. A valid token without them is
   * refused with 403 insufficient_scope naming them (and `requiredScopes`,
   * and the scopes of the tools a `tools/call` calls, see `toolScopes`),
   * and nothing is scheduled or sent. Classes not listed take any valid
   * token. Each scope a scope token, and one of `scopes` when that is set.
   * With any class listed, session ids carry their class's tag, and a
   * session opened without one (by a gateway without this option) is
   * answered 404, so its client opens another. Default none.
   */
  readonly classScopes?: Readonly<Record<string, readonly string[]>>;
  /**
   * `jwt`: per tool name, the scopes a token must grant, every one, for a
   * `tools/call` of that tool, in whatever class serves it (see ToolScopes):
   * legacy session requests, stateless requests, and each call of a
   * JSON-RPC batch. A valid token without them is refused with 403
   * insufficient_scope naming them (after `requiredScopes` and the scopes of
   * the class serving the request, as a class's refusal names the tools'
   * scopes: one step-up admits the call), and nothing is
   * scheduled or sent; its session serves on. Tools not listed, and methods
   * other than `tools/call`, take any valid token. Each scope a scope
   * token, and one of `scopes` when that is set. Default none.
   */
  readonly toolScopes?: Readonly<Record<string, readonly string[]>>;
  /**
   * `jwt`: the claims a token's scopes are read from, the first it carries
   * (see grantedScopes): `["scp", "roles"]` for Microsoft Entra ID, whose
   * delegated tokens carry `scp` and application tokens `roles`. Default
   * GATEWAY_DEFAULTS.jwtScopeClaims.
   */
  readonly scopeClaims?: readonly string[];
}

/**
 * A token the gateway presents: fixed, or a function asked for the current
 * one (e.g. a mounted Secret read again when it changes), so a rotated
 * token is presented without a restart. Connections already admitted with
 * the old one are not closed by the gateway, relay connections excepted
 * (closed once idle, see RelayConnections): their peer ends them when it
 * drops that token, and their replacements present the current one. The
 * function should keep returning the same string while the token stays the
 * same; what it returns is checked only when it changes, and an answer that
 * is undefined or invalid keeps the last good token (see tokenHeader).
 * Its `file`, when set, is the file it reads: the log lines about what it
 * returns name it (never the token), so an operator knows which to mend.
 */
export type TokenOption = string | ((() => string | undefined) & { readonly file?: string });

export interface GatewayOptions {
  /** Scheduler replica base URLs (`http://host:port`); tried in order with failover. */
  readonly schedulers: readonly string[];
  /** `proxy` (default): through the tunnel owner; `direct`: the runtime's advertised address when it has one. */
  readonly upstreamMode?: 'proxy' | 'direct';
  /**
   * Bearer token presented to a runtime's direct listener (direct mode), which
   * trusts identity headers and so demands one; visible ASCII. Sent only on
   * direct routes, never through the scheduler proxy. Default none. A
   * function is asked on every request (see TokenOption).
   */
  readonly upstreamToken?: TokenOption;
  /**
   * Bearer token presented to schedulers (one of their `apiTokens`), at
   * least 16 visible ASCII characters: on scheduling calls, `/api/proxy`
   * requests, event streams and relay connections (on the relay's upgrade
   * only: the requests a relay carries reach the runtime as sent). A
   * scheduler strips it before its tunnel, so no runtime sees it. Default
   * none, for schedulers with an open API. A function is asked on every
   * request and for every new relay connection (see TokenOption).
   */
  readonly schedulerToken?: TokenOption;
  /**
   * Event streams (`GET /mcp`) through a scheduler travel as HTTP/2 streams
   * (h2c on `http:` URLs, ALPN `h2` inside TLS on `https:` ones), many to a
   * connection, instead of one HTTP/1.1 connection each. Default true;
   * schedulers of this version serve both on one port, and one that refuses
   * the HTTP/2 preface, or a TLS front that does not offer `h2`, gets
   * HTTP/1.1 for a while (see EventStreamUpstream). Requests with a body
   * stay on HTTP/1.1.
   */
  readonly eventStreamsOverHttp2?: boolean;
  /**
   * Requests with a body (and DELETEs) through a scheduler travel on relay
   * connections: keep-alive connections the scheduler carries whole into the
   * runtime's tunnel (see RelayConnections), instead of through
   * `/api/proxy`, which parses and re-sends every request. Default true; a
   * refused relay (an older scheduler or runtime, a runtime that moved to
   * another replica) sends its requests through `/api/proxy` for a while.
   * Relays to `https:` scheduler URLs run over TLS, verified as undici
   * verifies the scheduler's other connections.
   */
  readonly relayConnections?: boolean;
  /**
   * How often a connection carrying event streams to a scheduler is checked
   * with an HTTP/2 PING; a ping unanswered by the next check fails its
   * streams, which their clients then open again. Default 10 s.
   */
  readonly eventStreamPingIntervalMs?: number;
  /**
   * How often an upstream the gateway holds HTTP/1.1 connections to (a
   * scheduler replica for relays and `/api/proxy`, a runtime in direct mode)
   * is checked (`GET /healthz`). One that leaves a check unanswered by the
   * next has its connections closed, failing their requests (502), and is
   * not dialled until it answers again: sessions follow their runtime to
   * the replica it redialled, or are lost (404) as with a dead runtime.
   * Default 5 s; 0 turns the checks off. They cost direct mode about 0.06
   * ms at p50 in the gateway suite (docs/benchmarks.md), for reasons not
   * yet understood.
   */
  readonly upstreamCheckIntervalMs?: number;
  readonly identity?: IdentityOptions;
  /** Class when no strategy yields one. Default `default`. */
  readonly defaultClass?: string;
  readonly routeCache?: RouteCacheOptions;
  /** Default `{mode: 'none'}`. */
  readonly auth?: AuthOptions;
  /**
   * Origins accepted when a request carries `Origin`: exact origins, `null`,
   * or `scheme://host:*` for any port of that host (see OriginPolicy).
   * Default none (any Origin → 403).
   */
  readonly allowedOrigins?: readonly string[];
  /** Largest request body. Default 4 MiB. */
  readonly bodyBytesMax?: number;
  /**
   * How long a request body may take to arrive once its headers are in;
   * past it a 408 (the request holds its principal's concurrency slot while
   * its body arrives). Default 60 s.
   */
  readonly bodyTimeoutMs?: number;
  /** Largest total of request header names and values. Default 16 KiB. */
  readonly headerBytesMax?: number;
  /**
   * In-flight requests per principal; an event stream (GET, `subscriptions/listen`)
   * counts until it is open. Past it, a POST of answers and notifications only
   * (which the calls in flight may be waiting for) is still carried, within as
   * many again, and so is a DELETE ending a session. Default 256.
   */
  readonly principalConcurrencyMax?: number;
  /**
   * Proxies (IP addresses, CIDR blocks) whose `X-Forwarded-For` names the
   * client, for the concurrency limit of anonymous requests (auth mode
   * `none`), which is per client address. Default none: every peer is the client.
   */
  readonly trustedProxies?: readonly string[];
  /**
   * The IPv6 prefix an anonymous client is counted by for that limit: a
   * host is handed a whole /64 and may use any address in it. 128 counts
   * each address apart. Default 64.
   */
  readonly clientIpv6PrefixLength?: number;
  /** Upstream idle timeout (headers, non-SSE bodies, keep-alive sockets). Default 10 min. */
  readonly idleTimeoutMs?: number;
  readonly logger?: GatewayLogger;
  readonly metrics?: { readonly registry: Registry; readonly prefix?: string };
  /**
   * Time seam for backoff sleeps, periodic checks and hold-offs (the JWKS
   * retry interval among them), all measured on its monotonic reading.
   * Default the system clock.
   */
  readonly clock?: Clock;
}

/** Every default in one place, units in the names. */
export const GATEWAY_DEFAULTS = {
  upstreamMode: 'proxy',
  eventStreamsOverHttp2: true,
  relayConnections: true,
  /** HTTP/2 streams per connection to a scheduler; more streams open another connection. */
  eventStreamsPerConnection: 4_096,
  eventStreamPingIntervalMs: 10_000,
  upstreamCheckIntervalMs: 5_000,
  defaultClass: DEFAULT_CLASS,
  routeCacheEntriesMax: 100_000,
  routeCacheTtlMs: 15 * 60_000,
  routeCacheRedisKeyPrefix: REDIS_ROUTE_PREFIX,
  bodyBytesMax: 4 * 1024 * 1024,
  /** A body of bodyBytesMax at about 1 Mbit/s (32 s), with room to spare. */
  bodyTimeoutMs: 60_000,
  headerBytesMax: 16 * 1024,
  principalConcurrencyMax: 256,
  clientIpv6PrefixLength: 64,
  /** Distinct principals tracked at once by the concurrency limiter. */
  principalsTrackedMax: 100_000,
  idleTimeoutMs: 10 * 60_000,
  /** A client's request headers (and, over TLS, its handshake), from its connection's start. */
  headersTimeoutMs: 30_000,
  /**
   * An idle client connection kept for its next request: above the 60 s a load
   * balancer or ingress in front keeps its own (ingress-nginx, AWS ALB), so it closes first.
   */
  keepAliveTimeoutMs: 75_000,
  metricsPrefix: 'switchyard_gateway_',
  /** Scheduler failover: rounds over every replica, backoff between rounds. */
  scheduleRoundsMax: 4,
  scheduleBackoffStartMs: 20,
  scheduleBackoffMaxMs: 1_000,
  /** One more dial of the same upstream after a connect failure. */
  dialRetryDelayMs: 50,
  /** Reschedules of an `initialize` or stateless request whose runtime could not be dialled. */
  rescheduleMax: 2,
  /**
   * How long a request whose scheduler replica cannot be dialled waits for
   * its runtime to show through another replica: a runtime redials the
   * scheduler Service at once when its replica goes (from 250 ms), and its
   * sessions live on.
   */
  ownerLossWaitMs: 3_000,
  connectTimeoutMs: 5_000,
  /**
   * How long an idle HTTP/1.1 connection to a scheduler or a runtime's direct
   * listener is kept at most, less if the upstream announces less
   * (`Keep-Alive: timeout`, minus undici's 2 s margin): under the 5 s of
   * Node's servers and most others, and far under the 65 s schedulers and
   * runtimes announce, so the gateway closes first and never sends on a
   * connection being closed, even with its event loop stalled for seconds.
   * Relay connections are kept as long as the runtime announces (60 s).
   */
  upstreamKeepAliveMs: 4_000,
  /** How long an HTTP/2 connection to a scheduler without streams stays open (GOAWAY makes its close safe). */
  http2IdleMs: 60_000,
  /** Auth mode `jwt`: JWKS refetch for an unknown `kid` at most this often (jose's default). */
  jwksCooldownMs: 30_000,
  /** Auth mode `jwt`: no JWKS fetch for this long after a failed one. */
  jwksRetryMs: 1_000,
  /**
   * Auth mode `jwt`: how far `exp`, `nbf` and `iat` may be off, for clocks that
   * disagree with the identity provider's (RFC 7519 allows "a few minutes").
   */
  jwtClockToleranceMs: 60_000,
  /** Auth mode `jwt`: the claim that names the principal. */
  jwtPrincipalClaim: 'sub',
  /** Auth mode `jwt`: the claims scopes are read from, the first a token carries. */
  jwtScopeClaims: ['scope', 'scp'],
  /**
   * Auth mode `jwt`: the algorithms taken, every asymmetric one jose
   * verifies but ML-DSA, which Node's Web Crypto still calls experimental
   * and identity providers do not issue yet (list it to take it).
   */
  jwtAlgorithms: ['RS256', 'RS384', 'RS512', 'PS256', 'PS384', 'PS512', 'ES256', 'ES384', 'ES512', 'EdDSA', 'Ed25519'],
} as const;

const silentLogger: GatewayLogger = { info() {}, warn() {}, error() {}, debug() {} };

export interface ResolvedOptions {
  readonly schedulers: readonly string[];
  readonly upstreamMode: 'proxy' | 'direct';
  readonly upstreamToken?: TokenOption;
  readonly schedulerToken?: TokenOption;
  readonly eventStreamsOverHttp2: boolean;
  readonly relayConnections: boolean;
  readonly eventStreamPingIntervalMs: number;
  readonly upstreamCheckIntervalMs: number;
  readonly identity: Required<IdentityOptions>;
  readonly routeCache: Required<Omit<RouteCacheOptions, 'redisUrl'>> & { readonly redisUrl?: string };
  readonly auth: AuthOptions;
  readonly allowedOrigins: OriginPolicy;
  readonly bodyBytesMax: number;
  readonly bodyTimeoutMs: number;
  readonly headerBytesMax: number;
  readonly principalConcurrencyMax: number;
  readonly trustedProxies: TrustedProxies;
  readonly clientIpv6PrefixLength: number;
  readonly idleTimeoutMs: number;
  readonly logger: GatewayLogger;
  readonly metrics?: { readonly registry: Registry; readonly prefix: string };
  readonly clock: Clock;
}

const isHttpUrl = (value: string): boolean => URL.canParse(value) && /^https?:$/.test(new URL(value).protocol);
/** RFC 6749 §3.3 scope-token: printable ASCII but space, `"` and `\`, so it fits a quoted challenge parameter. */
const SCOPE_TOKEN = /^[\x21\x23-\x5b\x5d-\x7e]+$/;

/** The protected resource metadata options (see AuthOptions) are what RFC 9728 and RFC 6750 allow. */
function checkResourceMetadata(auth: AuthOptions): void {
  if (auth.resource !== undefined && !(isHttpUrl(auth.resource) && new URL(auth.resource).hash === '')) {
    throw new SwitchyardError('invalid_request', 'auth.resource must be an http(s) URL without a fragment');
  }
  for (const server of auth.authorizationServers ?? []) {
    if (!isHttpUrl(server))
      throw new SwitchyardError('invalid_request', `auth.authorizationServers: ${server} is not an http(s) URL`);
  }
  for (const scope of auth.scopes ?? []) {
    if (!SCOPE_TOKEN.test(scope))
      throw new SwitchyardError('invalid_request', `auth.scopes: ${scope} is not a scope token`);
  }
}

/** The options of what a verified token is read for (see AuthOptions). */
function checkTokenClaims(auth: AuthOptions): void {
  const audiences = typeof auth.audience === 'string' ? [auth.audience] : auth.audience;
  // An empty list would refuse every token, an empty audience take any: neither is what its operator meant.
  if (audiences !== undefined && (audiences.length === 0 || audiences.includes(''))) {
    throw new SwitchyardError('invalid_request', 'auth.audience must name at least one audience, none empty');
  }
  if (auth.principalClaim !== undefined && !JWT_CLAIM_NAME.test(auth.principalClaim)) {
    throw new SwitchyardError(
      'invalid_request',
      'auth.principalClaim must be a claim name: 1-256 printable ASCII characters but space, " and \\',
    );
  }
  if (auth.scopeClaims !== undefined) {
    if (auth.scopeClaims.length === 0)
      throw new SwitchyardError('invalid_request', 'auth.scopeClaims must not be empty');
    for (const claim of auth.scopeClaims) {
      if (!JWT_CLAIM_NAME.test(claim))
        throw new SwitchyardError('invalid_request', `auth.scopeClaims: ${claim} is not a claim name`);
    }
  }
  const required = auth.requiredScopes ?? [];
  // Another mode has no scopes to check: an operator would believe them enforced.
  if (required.length > 0 && auth.mode !== 'jwt') {
    throw new SwitchyardError('invalid_request', 'auth.requiredScopes needs mode jwt');
  }
  for (const scope of required) {
    if (!SCOPE_TOKEN.test(scope))
      throw new SwitchyardError('invalid_request', `auth.requiredScopes: ${scope} is not a scope token`);
    // Clients ask for what auth.scopes names: a scope outside it would refuse every token they get.
    if (auth.scopes !== undefined && !auth.scopes.includes(scope))
      throw new SwitchyardError('invalid_request', `auth.requiredScopes: ${scope} is not in auth.scopes`);
  }
  checkScopeMap(auth, 'classScopes', (cls) => (isIdentityValue(cls) ? undefined : `${cls} is not a class name`));
  checkScopeMap(auth, 'toolScopes', (tool) => (tool === '' ? 'a tool name is empty' : undefined));
  if (auth.algorithms !== undefined) {
    if (auth.algorithms.length === 0) throw new SwitchyardError('invalid_request', 'auth.algorithms must not be empty');
    for (const alg of auth.algorithms) {
      if (!(JWT_ALGORITHMS as readonly string[]).includes(alg))
        throw new SwitchyardError(
          'invalid_request',
          `auth.algorithms: ${alg} is not one of ${JWT_ALGORITHMS.join(', ')}`,
        );
    }
  }
}

/**
 * auth.classScopes and auth.toolScopes: keys `keyProblem` passes (it names
 * what is wrong with one, else undefined), each with scope tokens clients
 * are told to ask for.
 */
function checkScopeMap(
  auth: AuthOptions,
  option: 'classScopes' | 'toolScopes',
  keyProblem: (key: string) => string | undefined,
): void {
  const entries = Object.entries(auth[option] ?? {});
  // Another mode has no scopes to check: an operator would believe the classes or tools held to them.
  if (entries.length > 0 && auth.mode !== 'jwt') {
    throw new SwitchyardError('invalid_request', `auth.${option} needs mode jwt`);
  }
  for (const [key, scopes] of entries) {
    const problem = keyProblem(key);
    if (problem !== undefined) throw new SwitchyardError('invalid_request', `auth.${option}: ${problem}`);
    // One listed with none would look held to scopes and take any token.
    if (scopes.length === 0) throw new SwitchyardError('invalid_request', `auth.${option}.${key} lists no scope`);
    for (const scope of scopes) {
      if (!SCOPE_TOKEN.test(scope))
        throw new SwitchyardError('invalid_request', `auth.${option}.${key}: ${scope} is not a scope token`);
      if (auth.scopes !== undefined && !auth.scopes.includes(scope))
        throw new SwitchyardError('invalid_request', `auth.${option}.${key}: ${scope} is not in auth.scopes`);
    }
  }
}

/** A fixed token is checked here, once; a function's answers as they change (tokenHeader). */
function fixedOrAsked(rule: TokenRule, token: TokenOption): TokenOption {
  return typeof token === 'string' ? checkToken(rule, token) : token;
}

/** 0 (the feature is off) or a positive integer. */
function offOrPositive(name: string, value: number): number {
  return value === 0 ? 0 : positive(name, value);
}

function positive(name: string, value: number): number {
  if (!Number.isSafeInteger(value) || value <= 0) {
    throw new SwitchyardError('invalid_request', `${name} must be a positive integer, got ${value}`);
  }
  return value;
}

function prefixLength(value: number): number {
  if (!Number.isInteger(value) || value < 1 || value > 128) {
    throw new SwitchyardError('invalid_request', `clientIpv6PrefixLength must be 1 to 128, got ${value}`);
  }
  return value;
}

/** The URL as given, or an error that says what is wrong with it without quoting it (it may hold a password). */
function checkedRedisUrl(url: string): string {
  const problem = redisUrlProblem(url);
  if (problem) throw new SwitchyardError('invalid_request', `routeCache.redisUrl ${problem}`);
  return url;
}

/** Visible ASCII, no space: what a Redis ACL key pattern (`~prefix*`) and a log line take as they are. */
export const REDIS_KEY_PREFIX_PATTERN = /^[\x21-\x7e]{1,64}$/;

function keyPrefix(prefix: string): string {
  if (!REDIS_KEY_PREFIX_PATTERN.test(prefix)) {
    throw new SwitchyardError('invalid_request', 'routeCache.redisKeyPrefix must be 1-64 visible ASCII characters');
  }
  return prefix;
}

/** Applies defaults and validates once; throws SwitchyardError('invalid_request') naming the bad option. */
export function resolveOptions(options: GatewayOptions): ResolvedOptions {
  if (options.schedulers.length === 0) throw new SwitchyardError('invalid_request', 'schedulers must not be empty');
  for (const url of options.schedulers) {
    if (!URL.canParse(url)) throw new SwitchyardError('invalid_request', `scheduler URL is invalid: ${url}`);
  }
  const auth = options.auth ?? { mode: 'none' };
  const tokens = typeof auth.tokens === 'function' ? auth.tokens() : auth.tokens;
  if (auth.mode === 'bearer' && !(tokens && tokens.length > 0)) {
    throw new SwitchyardError('invalid_request', 'auth.tokens must list at least one token in bearer mode');
  }
  if (auth.mode === 'jwt' && !(auth.jwksUrl && URL.canParse(auth.jwksUrl))) {
    throw new SwitchyardError('invalid_request', 'auth.jwksUrl must be a URL in jwt mode');
  }
  checkResourceMetadata(auth);
  checkTokenClaims(auth);
  if (auth.jwksCooldownMs !== undefined) positive('auth.jwksCooldownMs', auth.jwksCooldownMs);
  if (auth.jwksRetryMs !== undefined) positive('auth.jwksRetryMs', auth.jwksRetryMs);
  const defaultClass = options.defaultClass ?? GATEWAY_DEFAULTS.defaultClass;
  const d = GATEWAY_DEFAULTS;
  return {
    schedulers: options.schedulers.map((s) => s.replace(/\/+$/, '')),
    upstreamMode: options.upstreamMode ?? d.upstreamMode,
    eventStreamsOverHttp2: options.eventStreamsOverHttp2 ?? d.eventStreamsOverHttp2,
    relayConnections: options.relayConnections ?? d.relayConnections,
    eventStreamPingIntervalMs: positive(
      'eventStreamPingIntervalMs',
      options.eventStreamPingIntervalMs ?? d.eventStreamPingIntervalMs,
    ),
    upstreamCheckIntervalMs: offOrPositive(
      'upstreamCheckIntervalMs',
      options.upstreamCheckIntervalMs ?? d.upstreamCheckIntervalMs,
    ),
    ...(options.upstreamToken ? { upstreamToken: fixedOrAsked(UPSTREAM_TOKEN, options.upstreamToken) } : {}),
    ...(options.schedulerToken ? { schedulerToken: fixedOrAsked(SCHEDULER_TOKEN, options.schedulerToken) } : {}),
    identity: {
      class: options.identity?.class ?? ['path:class', 'header:X-Switchyard-Class', `default:${defaultClass}`],
      process: options.identity?.process ?? ['path:process', 'header:X-Switchyard-Process'],
      thread: options.identity?.thread ?? ['random'],
    },
    routeCache: {
      maxEntries: positive('routeCache.maxEntries', options.routeCache?.maxEntries ?? d.routeCacheEntriesMax),
      ttlMs: positive('routeCache.ttlMs', options.routeCache?.ttlMs ?? d.routeCacheTtlMs),
      redisKeyPrefix: keyPrefix(options.routeCache?.redisKeyPrefix ?? d.routeCacheRedisKeyPrefix),
      ...(options.routeCache?.redisUrl ? { redisUrl: checkedRedisUrl(options.routeCache.redisUrl) } : {}),
    },
    auth,
    allowedOrigins: new OriginPolicy(options.allowedOrigins ?? []),
    bodyBytesMax: positive('bodyBytesMax', options.bodyBytesMax ?? d.bodyBytesMax),
    bodyTimeoutMs: positive('bodyTimeoutMs', options.bodyTimeoutMs ?? d.bodyTimeoutMs),
    headerBytesMax: positive('headerBytesMax', options.headerBytesMax ?? d.headerBytesMax),
    principalConcurrencyMax: positive(
      'principalConcurrencyMax',
      options.principalConcurrencyMax ?? d.principalConcurrencyMax,
    ),
    trustedProxies: new TrustedProxies(options.trustedProxies ?? []),
    clientIpv6PrefixLength: prefixLength(options.clientIpv6PrefixLength ?? d.clientIpv6PrefixLength),
    idleTimeoutMs: positive('idleTimeoutMs', options.idleTimeoutMs ?? d.idleTimeoutMs),
    logger: options.logger ?? silentLogger,
    ...(options.metrics
      ? { metrics: { registry: options.metrics.registry, prefix: options.metrics.prefix ?? d.metricsPrefix } }
      : {}),
    clock: options.clock ?? systemClock,
  };
}
