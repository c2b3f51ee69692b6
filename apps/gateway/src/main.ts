#!/usr/bin/env node
// switchyard-gateway: the /mcp front door. Parses config, builds the gateway
// from @switchyard/gateway and serves it with probes and metrics.
import v8 from 'node:v8';
import { createGateway, createGatewayServer, type TokenOption } from '@switchyard/gateway';
import {
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
} from '@switchyard/service';
import { AUTH_TOKEN_LENGTH_MIN, checkTokenSources, gatewayConfigSchema } from './config.ts';

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
const server = createGatewayServer(gateway, handler, {
  headerBytesMax: config.headerBytesMax,
  bodyTimeoutMs: config.bodyTimeoutMs,
  headersTimeoutMs: config.headersTimeoutMs,
  keepAliveTimeoutMs: config.keepAliveTimeoutMs,
  connectionsMax: config.connectionsMax,
  writeStallTimeoutMs: config.writeStallTimeoutMs,
  ...(tls ? { tls: tls.pair } : {}),
  metrics,
  logger,
});
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
if (tls && 'setSecureContext' in server) lifecycle.onShutdown(tls.watch((pair) => server.setSecureContext(pair)));
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
