#!/usr/bin/env node
// switchyard-gateway: the /mcp front door. Parses config, builds the gateway
// from @switchyard/gateway and serves it with probes and metrics.
import v8 from 'node:v8';
import { createGateway, type TokenOption } from '@switchyard/gateway';
import {
  capConnections,
  closeStalledWrites,
  createLifecycle,
  createLogger,
  exitOnListenError,
  createMetrics,
  createProbeServer,
  listen,
  loadAppConfig,
  withProbes,
  secretSource,
  appTls,
  urlHost,
  tcpKeepAliveOptions,
  SERVER_TIMEOUT_CHECK_INTERVAL_MS,
  LINGER_DEFAULTS,
} from '@switchyard/service';
import { AUTH_TOKEN_LENGTH_MIN, checkTokenSources, gatewayConfigSchema } from './config.ts';

// Not `import http from 'node:http'`: Node builds that ESM namespace by
// reading every export, and three of them (WebSocket, CloseEvent,
// MessageEvent) are getters that load Node's bundled fetch implementation,
// which this process never uses: about 2 MB of a gateway holding 10,000
// idle streams (13 MB in a bare process). getBuiltinModule hands over the
// module object as it is.
const http = process.getBuiltinModule('node:http');

/** The idle timeout announced to clients in `Keep-Alive` (Node's default); see keepAliveTimeoutMs below. */
const ANNOUNCED_KEEP_ALIVE_MS = 5_000;

// Memory per idle stream: V8 lets the old generation grow to a multiple of
// what survived the last full collection before collecting again; a gateway
// holding thousands of open streams then carries several times their live
// size in garbage. 20 % headroom keeps its RSS close to what it holds, at
// the cost of more frequent (concurrent, incremental) full collections.
// Read at every collection, so it applies though V8 is already running; an
// explicit --heap-growing-percent on the command line wins. The young
// generation's size is fixed before any code runs, so deployments set it:
// NODE_OPTIONS=--max-semi-space-size=2 (2 MiB semi-spaces instead of 16:
// requests are short-lived, a larger nursery only holds more garbage per
// stream; the bench measured no latency cost at concurrency 1). So does
// malloc's: GLIBC_TUNABLES=glibc.malloc.mmap_threshold=10000 (the chart's
// glibcTunables, which says why).
if (!process.execArgv.some((a) => a.startsWith('--heap-growing-percent'))) {
  v8.setFlagsFromString('--heap-growing-percent=20');
}

const config = loadAppConfig(gatewayConfigSchema, {
  argv: process.argv.slice(2),
  env: process.env,
  program: 'switchyard-gateway',
  derive: checkTokenSources,
});
const logger = createLogger({ name: 'gateway', level: config.logLevel });
const metrics = createMetrics('gateway');
const chain = (value: string): string[] => value.split(',').map((s) => s.trim());
// One JWKS may sign for many issuers: every tenant of a multi-tenant provider shares its keys.
if (config.auth.mode === 'jwt' && !config.auth.issuer) {
  logger.warn({}, 'auth mode jwt without auth.issuer accepts tokens of any issuer the JWKS signs for: set it');
}
if (config.auth.mode === 'jwt' && !config.auth.audience && !config.auth.resource) {
  logger.warn(
    {},
    "auth mode jwt without auth.audience or auth.resource accepts the issuer's tokens for any audience: set one",
  );
}
// Whoever can answer the key set's fetch picks the keys, and so signs any token the gateway accepts.
const jwks = config.auth.mode === 'jwt' && config.auth.jwksUrl ? new URL(config.auth.jwksUrl) : undefined;
if (jwks?.protocol === 'http:' && !/^(localhost|127(\.\d{1,3}){3}|\[::1\])$/.test(jwks.hostname)) {
  logger.warn(
    { jwksUrl: jwks.origin },
    'auth.jwksUrl is plain http: anyone on the path to it can hand the gateway keys and sign tokens it accepts; use https',
  );
}

/**
 * A token from its inline value or from its file: the file's first value,
 * read again when the file changes (at most once a second). The same string
 * comes back until then, so the gateway builds its header once per change.
 * The file rides along, for the gateway's log lines about it.
 */
function tokenFrom(inline: string | undefined, file: string | undefined): TokenOption | undefined {
  if (file === undefined) return inline;
  const read = secretSource([], file);
  return Object.assign(() => read()[0], { file });
}
const upstreamToken = tokenFrom(config.upstreamToken, config.upstreamTokenFile);
const schedulerToken = tokenFrom(config.schedulerToken, config.schedulerTokenFile);

// Read again when the file changes: a mounted Secret rotates without a restart. Held to the
// length of inline tokens; read once here, so a short line is reported at start.
const authTokens = secretSource(config.auth.tokens, config.auth.tokensFile, {
  lengthMin: AUTH_TOKEN_LENGTH_MIN,
  onShort: (file, count) =>
    logger.warn(
      { file, option: 'auth.tokensFile', count },
      `auth.tokensFile ${file}: ${count} token(s) shorter than ${AUTH_TOKEN_LENGTH_MIN} characters left out`,
    ),
});
authTokens();

const gateway = createGateway({
  schedulers: config.schedulers,
  upstreamMode: config.upstreamMode,
  eventStreamsOverHttp2: config.eventStreamsOverHttp2,
  relayConnections: config.relayConnections,
  eventStreamPingIntervalMs: config.eventStreamPingIntervalMs,
  upstreamCheckIntervalMs: config.upstreamCheckIntervalMs,
  ...(upstreamToken ? { upstreamToken } : {}),
  ...(schedulerToken ? { schedulerToken } : {}),
  identity: {
    class: chain(config.identity.class),
    process: chain(config.identity.process),
    thread: chain(config.identity.thread),
  },
  defaultClass: config.defaultClass,
  routeCache: {
    maxEntries: config.routeCache.maxEntries,
    ttlMs: config.routeCache.ttlMs,
    ...(config.routeCache.redisUrl ? { redisUrl: config.routeCache.redisUrl } : {}),
    redisKeyPrefix: config.routeCache.redisKeyPrefix,
  },
  auth: {
    mode: config.auth.mode,
    // A list that cannot change holds no request to its token: the gateway spends nothing on it per request.
    tokens: config.auth.tokensFile === undefined ? config.auth.tokens : authTokens,
    ...(config.auth.jwksUrl ? { jwksUrl: config.auth.jwksUrl } : {}),
    ...(config.auth.issuer ? { issuer: config.auth.issuer } : {}),
    ...(config.auth.audience ? { audience: config.auth.audience } : {}),
    ...(config.auth.resource ? { resource: config.auth.resource } : {}),
    ...(config.auth.authorizationServers ? { authorizationServers: config.auth.authorizationServers } : {}),
    ...(config.auth.scopes ? { scopes: config.auth.scopes } : {}),
    principalClaim: config.auth.principalClaim,
    algorithms: config.auth.algorithms,
    requireAccessTokenType: config.auth.requireAccessTokenType,
    requiredScopes: config.auth.requiredScopes,
    classScopes: config.auth.classScopes,
    toolScopes: config.auth.toolScopes,
    scopeClaims: config.auth.scopeClaims,
  },
  allowedOrigins: config.allowedOrigins,
  bodyBytesMax: config.bodyBytesMax,
  bodyTimeoutMs: config.bodyTimeoutMs,
  headerBytesMax: config.headerBytesMax,
  principalConcurrencyMax: config.principalConcurrencyMax,
  trustedProxies: config.trustedProxies,
  clientIpv6PrefixLength: config.clientIpv6PrefixLength,
  idleTimeoutMs: config.idleTimeoutMs,
  logger,
  metrics: { registry: metrics.registry },
});

const lifecycle = createLifecycle({ drainDelayMs: config.drainDelayMs, logger });
const handler = withProbes(gateway.app, {
  healthz: lifecycle.healthzHandler,
  readyz: lifecycle.readyzHandler,
  ...(config.metricsPort === undefined ? { registry: metrics.registry } : {}),
});
// On a port of its own, /metrics stays in where the /mcp port is published. /healthz too, for a
// liveness probe that a /mcp port full of connections (connectionsMax) does not fail: the kubelet would
// restart the gateway and end every session the cap kept.
const metricsServer =
  config.metricsPort === undefined
    ? undefined
    : createProbeServer({ registry: metrics.registry, healthz: lifecycle.healthzHandler });
const tls = appTls('switchyard-gateway', config.tls, logger);
// Node's parser refuses a header block past its own limit (16 KiB by default) before the gateway
// sees it, so a headerBytesMax above that would never be reached: the parser takes as much. (It
// counts names, values and the request target; the gateway names and values, 4 bytes more a field.)
// Never less than Node's default: under it the gateway refuses a block itself, with a JSON-RPC body.
const maxHeaderSize = Math.max(config.headerBytesMax, http.maxHeaderSize);
// The gateway writes nothing of its own on an idle event stream: TCP keepalive
// finds a client whose host vanished without closing its connection.
const accepted = {
  ...tcpKeepAliveOptions(),
  connectionsCheckingInterval: SERVER_TIMEOUT_CHECK_INTERVAL_MS,
  maxHeaderSize,
};
// Node's default handshake timeout, 120 s, would let a client that never completes TLS hold its
// connection four times as long as one that never sends its headers.
const secure =
  tls &&
  process
    .getBuiltinModule('node:https')
    .createServer(
      { ...tls.pair, ALPNProtocols: ['http/1.1'], ...accepted, handshakeTimeout: config.headersTimeoutMs },
      handler,
    );
const server = secure || http.createServer(accepted, handler);
// What Node's parser refuses (a header block past maxHeaderSize among them) is answered with a JSON-RPC body too.
server.on('clientError', gateway.clientError);
// Deadlines on receiving a request, not on answering it: an SSE stream
// answering a complete request stays open for hours. The gateway answers a
// POST body still arriving at bodyTimeoutMs with a 408 itself; Node's
// requestTimeout (checked every second) is the backstop for bodies the gateway
// never reads (a GET or DELETE sent with one), a linger later.
server.headersTimeout = config.headersTimeoutMs;
server.requestTimeout = config.headersTimeoutMs + config.bodyTimeoutMs + LINGER_DEFAULTS.lingerMs;
// Clients that read `Keep-Alive` (MCP SDKs on fetch) close an idle
// connection before the 5 s announced, so the gateway holds no idle socket per
// session for long. A load balancer in front reads no such header and keeps
// its own for up to a minute: the socket stays open keepAliveTimeoutMs in
// all, so the balancer closes first.
server.keepAliveTimeout = Math.min(config.keepAliveTimeoutMs, ANNOUNCED_KEEP_ALIVE_MS);
server.keepAliveTimeoutBuffer = config.keepAliveTimeoutMs - server.keepAliveTimeout;
// A flood of connections must not take the memory the open event streams live on (see capConnections).
capConnections(server, { connectionsMax: config.connectionsMax, metrics, logger });
// HTTP/1.1 has no ping: a client whose host vanished while a stream writes to it is found once the writes back
// up, and its stream cancelled upstream, not after the kernel's retransmission timeout.
closeStalledWrites(server, { stallTimeoutMs: config.writeStallTimeoutMs, metrics, logger });
const address = await listen(server, { host: config.host, port: config.port }).catch((error: unknown) =>
  exitOnListenError('switchyard-gateway', error),
);
lifecycle.addServer(server);
const metricsAddress =
  metricsServer &&
  (await listen(metricsServer, { host: config.host, port: config.metricsPort ?? 0 }).catch((error: unknown) =>
    exitOnListenError('switchyard-gateway', error),
  ));
if (metricsServer) lifecycle.addServer(metricsServer);
// Event streams never end by themselves: their clients open them again on another replica.
lifecycle.onServersClosing(() => gateway.endEventStreams());
lifecycle.onShutdown(() => gateway.close());
if (tls && secure) lifecycle.onShutdown(tls.watch((pair) => secure.setSecureContext(pair)));
lifecycle.markReady();
lifecycle.installSignalHandlers();
logger.info(
  {
    url: `${tls ? 'https' : 'http'}://${urlHost(config.host)}:${address.port}/mcp`,
    port: address.port,
    ...(metricsAddress ? { metrics: `http://${urlHost(config.host)}:${metricsAddress.port}/metrics` } : {}),
  },
  'ready',
);
