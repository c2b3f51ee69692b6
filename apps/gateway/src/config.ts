import { z } from 'zod';
import {
  GATEWAY_DEFAULTS as D,
  JWT_ALGORITHMS,
  JWT_CLAIM_NAME,
  originEntryProblem,
  parseStrategy,
  REDIS_KEY_PREFIX_PATTERN,
  trustedProxyProblem,
} from '@switchyard/gateway';
import {
  ConfigError,
  connectionsMaxField,
  httpUrl,
  processConfigFields,
  redisUrlField,
  timerBounded,
  WRITE_STALL_TIMEOUT_MS_DEFAULT,
  tlsFilesField,
} from '@switchyard/service';

/** A class, process or thread id as the identity headers carry it (`isIdentityValue`). */
const IDENTITY_VALUE = '[A-Za-z0-9._:@-]{1,128}';
/** Identity sources of design brief §2; a comma-separated list is tried in order (first value wins). */
const ONE = String.raw`(default:${IDENTITY_VALUE}|random|mcp-session|principal|(header|query|path):[A-Za-z0-9._-]{1,128})`;
const STRATEGY = new RegExp(`^${ONE}(,${ONE})*$`);
const strategy = (fallback: string, text: string) =>
  z
    .string()
    .regex(
      STRATEGY,
      'must be default:<v>, random, mcp-session, principal, header:<name>, query:<name> or path:<name>, or a comma-separated list of them',
    )
    // What the pattern lets through may still name a header no client may name a sandbox by.
    .superRefine((chain, ctx) => {
      if (!STRATEGY.test(chain)) return;
      for (const one of chain.split(',')) {
        try {
          parseStrategy(one);
        } catch (error) {
          ctx.addIssue({ code: 'custom', message: (error as Error).message });
        }
      }
    })
    .default(fallback)
    .describe(
      `${text} A comma-separated list is tried in order. A header strategy may not read connection or credential headers, nor X-Switchyard-* headers other than X-Switchyard-Class and X-Switchyard-Process; path: reads class or process.`,
    );

/** A list of strings, empty by default, each refused with what `problemOf` says is wrong with it. */
const checkedList = (problemOf: (entry: string) => string | undefined) =>
  z
    .array(
      z.string().superRefine((entry, ctx) => {
        const problem = problemOf(entry);
        if (problem) ctx.addIssue({ code: 'custom', message: problem });
      }),
    )
    .default([]);

/** RFC 6749 §3.3 scope-token: printable ASCII but space, `"` and `\`, so it fits a quoted challenge parameter. */
const scopeToken = z.string().regex(/^[\x21\x23-\x5b\x5d-\x7e]+$/, 'must be a scope token (RFC 6749 §3.3)');

/** Shortest client bearer token taken, inline or from auth.tokensFile: a short one is guessed too easily. */
export const AUTH_TOKEN_LENGTH_MIN = 16;

const authSchema = z
  .object({
    mode: z
      .enum(['none', 'bearer', 'jwt'])
      .default('none')
      .describe('Client authentication: none, static bearer tokens, or JWT.'),
    tokens: z
      .array(z.string().min(AUTH_TOKEN_LENGTH_MIN))
      .default([])
      .meta({ secret: true })
      .describe('Accepted bearer tokens (mode bearer).'),
    tokensFile: z
      .string()
      .optional()
      .describe(
        `File of bearer tokens, one per line (mode bearer); re-read when it changes (for mounted Secrets). A line shorter than ${AUTH_TOKEN_LENGTH_MIN} characters is left out, with a warning naming the file.`,
      ),
    jwksUrl: httpUrl().optional().describe('JWKS URL that signs accepted JWTs (mode jwt).'),
    issuer: z
      .string()
      .optional()
      .describe('Required JWT `iss` (mode jwt). Unset: any issuer the JWKS signs for (warned at start).'),
    audience: z
      .array(z.string().min(1))
      .min(1)
      .optional()
      .describe(
        'JWT `aud` a token must name (mode jwt): one, or a list of which it must name one, for a gateway reachable under more than one name or moving from one audience to another. Unset: auth.resource, else any audience (warned at start). The protected resource metadata names auth.resource alone.',
      ),
    resource: httpUrl()
      .optional()
      .meta({ defaultText: "from each request's Host and X-Forwarded-Proto" })
      .describe(
        'Canonical URL of /mcp as MCP clients reach it, e.g. https://mcp.example.com/mcp (mode jwt): the resource of the OAuth protected resource metadata clients discover authorization servers from.',
      ),
    authorizationServers: z
      .array(httpUrl())
      .optional()
      .meta({ defaultText: 'issuer, when it is a URL' })
      .describe('Authorization servers (issuer URLs) that MCP clients get tokens from (mode jwt).'),
    scopes: z
      .array(z.string().min(1))
      .optional()
      .describe('Scopes MCP clients ask for, named in the metadata and in 401 challenges (mode jwt).'),
    principalClaim: z
      .string()
      .regex(JWT_CLAIM_NAME, 'must be a claim name: 1-256 printable ASCII characters but space, " and \\')
      .default(D.jwtPrincipalClaim)
      .describe(
        'Top-level JWT claim that names the principal (mode jwt), a non-empty string: e.g. client_id, azp or cid for client-credential tokens, or email. A token without it gets 401; a value other than 1-128 characters from [A-Za-z0-9._:@-] travels as <claim>:<hash>. Changing it changes every principal: sessions opened before are lost (404) and clients open new ones.',
      ),
    requiredScopes: z
      .array(scopeToken)
      .default([])
      .describe(
        'Scopes a token must grant, every one (mode jwt), read from the claims of auth.scopeClaims (scope, else scp); a valid token without them gets 403 with WWW-Authenticate error="insufficient_scope" naming them, from which MCP clients ask for more. Each must be one of auth.scopes when that is set; without it, clients are told to ask for these. auth.scopes alone is not enforced.',
      ),
    classScopes: z
      .record(
        z.string().regex(new RegExp(`^${IDENTITY_VALUE}$`), 'must be a class: 1-128 characters from [A-Za-z0-9._:@-]'),
        z.array(scopeToken).min(1, 'must list at least one scope'),
      )
      .default({})
      .describe(
        'Per class, the scopes a token must grant, every one, for requests served by that class (mode jwt), e.g. {"prod-db": ["db:read"]}: a legacy session\'s requests by the class it was opened to, whatever class they name; a stateless request by the class it names. A valid token without them gets 403 with WWW-Authenticate error="insufficient_scope" naming them (after auth.requiredScopes), and the request goes nowhere. Classes not listed take any valid token. Each scope must be one of auth.scopes when that is set. With a class listed, session ids carry a tag of their class; sessions opened without one (before the option was set) get 404 and are opened again. A map: JSON in env and flags, clearer in the config file.',
      ),
    toolScopes: z
      .record(z.string().min(1, 'must be a tool name'), z.array(scopeToken).min(1, 'must list at least one scope'))
      .default({})
      .describe(
        'Per tool name, the scopes a token must grant, every one, for a tools/call of that tool (mode jwt), e.g. {"delete_repo": ["repo:admin"]}, whatever class serves it: a name applies in every class, so naming another class does not dodge it. Checked for legacy session and stateless requests, and for each call of a JSON-RPC batch (a batch with one refused call is refused whole). A valid token without them gets 403 with WWW-Authenticate error="insufficient_scope" naming them (after auth.requiredScopes), nothing is sent, and the session serves on. Tools not listed, and other methods (tools/list), take any valid token. Each scope must be one of auth.scopes when that is set. A map: JSON in env and flags, clearer in the config file.',
      ),
    scopeClaims: z
      .array(z.string().regex(JWT_CLAIM_NAME, 'must be a claim name'))
      .min(1)
      .default([...D.jwtScopeClaims])
      .describe(
        'JWT claims a token\'s scopes are read from for auth.requiredScopes, auth.classScopes and auth.toolScopes (mode jwt), the first the token carries; each a space-separated string or a list. For Microsoft Entra ID, ["scp", "roles"]: delegated tokens carry scp, application (client-credential) tokens roles.',
      ),
    algorithms: z
      .array(z.enum(JWT_ALGORITHMS))
      .min(1)
      .default([...D.jwtAlgorithms])
      .describe(
        'JWS algorithms a token may be signed with (mode jwt); a token of another gets 401 before any key is looked up. List only those your identity provider signs with (RS256 for most). Never none or HMAC (HS256…); ML-DSA only when listed.',
      ),
    requireAccessTokenType: z
      .boolean()
      .default(false)
      .describe(
        'Take only RFC 9068 access tokens, whose header says typ at+jwt (or application/at+jwt, in any case), mode jwt: an ID token or another JWT the issuer signs for the same audience gets 401 with error_description "token is not an access token (typ at+jwt)". Off by default: many identity providers set typ JWT, or none.',
      ),
  })
  .superRefine((a, ctx) => {
    if (a.mode === 'bearer' && a.tokens.length === 0 && !a.tokensFile) {
      ctx.addIssue({ code: 'custom', message: 'mode bearer needs tokens or tokensFile' });
    }
    if (a.mode === 'jwt' && !a.jwksUrl) ctx.addIssue({ code: 'custom', message: 'mode jwt needs jwksUrl' });
    if (a.mode !== 'jwt' && a.requiredScopes.length > 0) {
      ctx.addIssue({ code: 'custom', path: ['requiredScopes'], message: 'needs mode jwt, which has scopes to check' });
    }
    if (a.mode !== 'jwt' && a.requireAccessTokenType) {
      ctx.addIssue({
        code: 'custom',
        path: ['requireAccessTokenType'],
        message: 'needs mode jwt, whose tokens have a type',
      });
    }
    for (const scope of a.scopes ? a.requiredScopes : []) {
      if (!a.scopes!.includes(scope)) {
        const message = `${scope} is not in auth.scopes, which clients ask for: every token would be refused`;
        ctx.addIssue({ code: 'custom', path: ['requiredScopes'], message });
      }
    }
    // Per class and per tool: scopes only a JWT carries, each one clients are told to ask for.
    for (const [option, what] of [
      ['classScopes', 'class'],
      ['toolScopes', 'tool'],
    ] as const) {
      const entries = Object.entries(a[option]);
      if (a.mode !== 'jwt' && entries.length > 0) {
        ctx.addIssue({ code: 'custom', path: [option], message: 'needs mode jwt, which has scopes to check' });
      }
      for (const [key, scopes] of a.scopes ? entries : []) {
        for (const scope of scopes.filter((s) => !a.scopes!.includes(s))) {
          const message = `${scope} is not in auth.scopes, which clients ask for: every token would be refused the ${what}`;
          ctx.addIssue({ code: 'custom', path: [option, key], message });
        }
      }
    }
  });

/** Options of the gateway (`switchyard-gateway`). */
export const gatewayConfigSchema = z.object({
  host: z.string().default('0.0.0.0').describe('Address the /mcp listener binds.'),
  port: z.number().int().min(0).max(65535).default(8080).describe('Port of the listener (0 picks a free port).'),
  metricsPort: z
    .number()
    .int()
    .min(0)
    .max(65535)
    .optional()
    .describe(
      'A listener of its own for /metrics, plain HTTP on host (0 picks a free port, named on the ready line), which the /mcp port then no longer serves: /metrics asks for no credentials, and a Service or front that publishes the /mcp port publishes it too. It answers /healthz as well, for a liveness probe that a /mcp port full of connections (connectionsMax) does not fail. Unset: /metrics is on the /mcp port.',
    ),
  keepAliveTimeoutMs: timerBounded(z.number().int().min(1000))
    .default(D.keepAliveTimeoutMs)
    .describe(
      'How long an idle client connection stays open for its next request. Keep it above the idle timeout of a load balancer or ingress in front (60 s on ingress-nginx and AWS ALB), so the balancer closes first: one that sends a request on a connection the gateway is closing answers it 502 and does not retry a POST. Clients are told 5 s in Keep-Alive, so those that read it (MCP SDKs) close theirs sooner and hold no idle connection per session at the gateway.',
    ),
  connectionsMax: connectionsMaxField(
    'Most client connections the /mcp listener holds at once (event streams, requests, idle keep-alive ones); one more is closed unread, counted in connections_refused_total and warned of at most once per 10 s. Sized for 10,000 idle event streams (about 30 KB each, see docs/benchmarks.md) with room for requests; raise it with the memory limit.',
  ),
  tls: tlsFilesField(
    'the gateway serves /mcp over HTTPS',
    'TLS on the /mcp listener, for clients that reach the gateway without a TLS-ending Ingress or load balancer in front.',
  ),
  schedulers: z.array(httpUrl()).min(1).describe('Base URLs of scheduler replicas (any replica answers).'),
  upstreamMode: z
    .enum(['proxy', 'direct'])
    .default(D.upstreamMode)
    .describe('`proxy` sends traffic through the scheduler tunnel; `direct` dials a runtime address when it has one.'),
  upstreamToken: z
    .string()
    .trim()
    .regex(/^[\x21-\x7e]+$/, 'visible ASCII characters only')
    .optional()
    .meta({ secret: true })
    .describe(
      "Bearer token presented to runtimes' direct listeners (upstreamMode direct); one shorter than 16 characters is warned of at start.",
    ),
  upstreamTokenFile: z
    .string()
    .optional()
    .describe(
      "File holding upstreamToken instead (a mounted Secret), its first value, so it may list the runtimes' tokens too; read again when it changes, so a rotated token is presented without a restart. A file without a valid token is logged, naming the file, and leaves the last good one in use; a token shorter than 16 characters is presented, with a warning naming the file.",
    ),
  schedulerToken: z
    .string()
    .trim()
    .regex(/^[\x21-\x7e]{16,}$/, 'at least 16 visible ASCII characters')
    .optional()
    .meta({ secret: true })
    .describe(
      'Bearer token presented to schedulers, one of their apiTokens; needed when they set any. A scheduler strips it before its tunnel: runtimes never see it.',
    ),
  schedulerTokenFile: z
    .string()
    .optional()
    .describe(
      "File holding schedulerToken instead (a mounted Secret), its first value, so it may be the schedulers' apiTokens file; read again when it changes, so a rotated token is presented without a restart (new relay connections and event streams too). A file without a valid token is logged, naming the file, and leaves the last good one in use.",
    ),
  eventStreamsOverHttp2: z
    .boolean()
    .default(D.eventStreamsOverHttp2)
    .describe(
      'GET event streams through a scheduler travel as HTTP/2 streams (h2c, or ALPN h2 on https: URLs), many per connection, instead of one HTTP/1.1 connection each; a scheduler or TLS front without HTTP/2 gets HTTP/1.1.',
    ),
  relayConnections: z
    .boolean()
    .default(D.relayConnections)
    .describe(
      'Requests through a scheduler travel on relay connections it carries whole into the runtime tunnel, instead of being proxied one by one on /api/proxy (over TLS for https: scheduler URLs); turn off if a hop between gateway and scheduler passes no custom Upgrade.',
    ),
  eventStreamPingIntervalMs: timerBounded(z.number().int().min(100))
    .default(D.eventStreamPingIntervalMs)
    .describe(
      'How often a connection carrying event streams to a scheduler is pinged (HTTP/2 PING); a ping unanswered by the next one fails its streams, which clients then reopen. A round that came late because the gateway itself stood still (a blocked event loop, a starved CPU) waits another interval, at most three times.',
    ),
  upstreamCheckIntervalMs: timerBounded(z.number().int())
    .refine((ms) => ms === 0 || ms >= 100, 'must be 0 (off) or at least 100')
    .default(D.upstreamCheckIntervalMs)
    .describe(
      'How often an upstream the gateway holds HTTP/1.1 connections to (a scheduler replica for relays and /api/proxy, a runtime in direct mode) is checked with GET /healthz; one that leaves a check unanswered by the next has its connections closed (their requests fail with 502) and is not dialled until it answers again, so sessions follow their runtime to the replica it redialled, or are lost (404) as with a dead runtime. 0 turns the checks off (see docs/benchmarks.md for what they cost).',
    ),
  writeStallTimeoutMs: timerBounded(z.number().int().min(1000))
    .default(WRITE_STALL_TIMEOUT_MS_DEFAULT)
    .describe(
      "How long a client connection's writes may wait with no byte taken by the client before the connection is closed, ending its streams (GET event streams, SSE answers) and cancelling what is behind them upstream (the scheduler's and the runtime's streams, a stateless call): HTTP/1.1 has no ping, so a client whose host vanished without a reset would hold a stream that keeps writing until the kernel's retransmission timeout, about 15 minutes. A reader that keeps taking bytes is kept. On Linux, a connection the kernel has retransmitted to for as long with no acknowledgement (a stream that writes only keep-alive comments, which never backs up) is closed too.",
    ),
  identity: z
    .object({
      class: strategy('path:class,header:X-Switchyard-Class', 'Where the class of a request comes from.'),
      process: strategy(
        'path:process,header:X-Switchyard-Process',
        'Where the process (sandbox) id comes from; falls back to the thread. A sandbox is not bound to a principal: any principal that names a process reaches it. principal gives each principal a sandbox of its own, which no other can name.',
      ),
      thread: strategy('mcp-session', 'Where the thread id comes from.'),
    })
    .prefault({})
    .describe('Identity strategies.'),
  defaultClass: z
    .string()
    .regex(new RegExp(`^${IDENTITY_VALUE}$`), 'must be 1-128 characters from [A-Za-z0-9._:@-]')
    .default(D.defaultClass)
    .describe(
      'Class used when the class source yields nothing (the request names no class). Keep it a class your runtimes serve (a runtime serves `demo` unless configured otherwise): a request of a class no runtime serves gets 503 unschedulable, whose message names the class and says the request got the default.',
    ),
  routeCache: z
    .object({
      maxEntries: z
        .number()
        .int()
        .min(1)
        .default(D.routeCacheEntriesMax)
        .describe('Most routes kept in the in-process LRU.'),
      ttlMs: z
        .number()
        .int()
        .min(1)
        .default(D.routeCacheTtlMs)
        .describe('How long a cached route lives after its last use, in memory and in Redis.'),
      redisUrl: redisUrlField('Redis URL of a route cache shared by replicas'),
      redisKeyPrefix: z
        .string()
        .regex(REDIS_KEY_PREFIX_PATTERN, 'must be 1-64 visible ASCII characters')
        .default(D.routeCacheRedisKeyPrefix)
        .describe(
          "Prefix of every key the gateway writes to Redis. Deployments sharing one Redis database (staging and production, two tenants) need one each: a sandbox name both use has the same key, and one deployment's gateways would send its requests to the other's runtimes. A Redis ACL user for the gateways can be held to it (~<prefix>*).",
        ),
    })
    .prefault({})
    .describe('Route cache.'),
  auth: authSchema.prefault({}).describe('Client authentication.'),
  allowedOrigins: checkedList(originEntryProblem).describe(
    'Browser origins allowed to call /mcp, with CORS (preflights answered, Mcp-Session-Id exposed): exact origins as browsers send them (an IPv6 host compressed, `http://[::1]:3000`; no default port), `null`, or `scheme://host:*` for any port of a host; empty allows none (requests without Origin pass).',
  ),
  bodyBytesMax: z.number().int().min(1).default(D.bodyBytesMax).describe('Largest request body accepted.'),
  bodyTimeoutMs: timerBounded(z.number().int().min(1))
    .default(D.bodyTimeoutMs)
    .describe(
      "How long a request body may take to arrive once its headers are in; past it the request is answered 408 and its connection closed. The request holds one of its principal's principalConcurrencyMax slots meanwhile, so a client trickling its body byte by byte would otherwise hold it for ever.",
    ),
  headersTimeoutMs: timerBounded(z.number().int().min(1000))
    .default(D.headersTimeoutMs)
    .describe(
      'How long a client may take to send its request headers once connected (and, over TLS, its handshake before them); past it the connection is closed (408 if a request had begun). Checked every second.',
    ),
  headerBytesMax: z
    .number()
    .int()
    .min(1024)
    .default(D.headerBytesMax)
    .describe(
      'Largest request header block accepted (names and values). It may be set high for large credentials, which are never forwarded: the headers forwarded to runtimes (all but Authorization and Cookie) may total 64 KiB, counted as HTTP/2 counts them (32 bytes more a field), which is what schedulers and runtimes take; past that the gateway answers 431 itself.',
    ),
  principalConcurrencyMax: z
    .number()
    .int()
    .min(1)
    .default(D.principalConcurrencyMax)
    .describe(
      "Most concurrent requests per principal (per client address in auth mode none). An event stream (a GET, a subscriptions/listen) counts until it is open, not while it stays open. Past it, a POST that asks nothing (a client's answers to sampling or elicitation, its notifications/cancelled: the calls holding the slots wait for them) is still carried, within as many again, and so is a DELETE ending a session.",
    ),
  trustedProxies: checkedList(trustedProxyProblem).describe(
    'Proxies in front of the gateway (IP addresses, CIDR blocks such as 10.0.0.0/8) whose X-Forwarded-For names the client: the address principalConcurrencyMax counts by in auth mode none. Empty: the peer is the client.',
  ),
  clientIpv6PrefixLength: z
    .number()
    .int()
    .min(1)
    .max(128)
    .default(D.clientIpv6PrefixLength)
    .describe(
      'The IPv6 prefix an anonymous client (auth mode none) is counted by for principalConcurrencyMax: a host is handed a whole /64 and may send from any address in it, so a limit per address is one it lifts at will. 128 counts each IPv6 address apart (e.g. pods of one node sharing a /64 that should not share a limit).',
    ),
  idleTimeoutMs: timerBounded(z.number().int().min(1))
    .default(D.idleTimeoutMs)
    .describe('Idle time after which a stream is closed (above the scheduler and runtime ones).'),
  ...processConfigFields,
});

export type GatewayConfig = z.output<typeof gatewayConfigSchema>;

/**
 * One token is presented, from its inline value or from its file, never a
 * choice between the two at run time (loadAppConfig's `derive`).
 */
export function checkTokenSources(config: GatewayConfig): GatewayConfig {
  const problems: string[] = [];
  for (const name of ['schedulerToken', 'upstreamToken'] as const) {
    if (config[name] !== undefined && config[`${name}File`] !== undefined) {
      problems.push(`${name}File: set ${name} or ${name}File, not both`);
    }
  }
  if (problems.length > 0) throw new ConfigError('invalid configuration', problems);
  return config;
}
