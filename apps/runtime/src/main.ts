#!/usr/bin/env node
// switchyard-runtime: one runtime node. Parses config and hands it to
// @switchyard/runtime; the tunnel to the scheduler is dialled from here.
import { startRuntimeNode } from '@switchyard/runtime';
import { logMeteringSink, noMeteringSink, redisMeteringSink, type MeteringSink } from '@switchyard/sandbox';
import {
  createLifecycle,
  createLogger,
  createMetrics,
  createProbeServer,
  loadAppConfig,
  exitOnListenError,
  listen,
  secretSource,
  urlHost,
  WILDCARD_HOSTS,
} from '@switchyard/service';
import { engineConfigs, withClassDirs } from './classes.ts';
import { healthListenerOn, runtimeConfigSchema, type RuntimeConfig } from './config.ts';

const config = loadAppConfig(runtimeConfigSchema, {
  argv: process.argv.slice(2),
  env: process.env,
  program: 'switchyard-runtime',
  derive: (c) => withClassDirs(c, process.cwd()),
});
const logger = createLogger({ name: 'runtime', level: config.logLevel });

/**
 * The join token, asked at every dial: from joinTokenFile it is read again
 * when the file changes, so a rotated Secret is presented from the next
 * dial on (a scheduler that drops the old token closes the tunnel, and the
 * redial carries the new one). Looked at on every ask, not once a second:
 * that redial may come within a second of the previous dial. A file that
 * cannot be read for a moment leaves the last token read.
 */
function joinTokenSource(c: RuntimeConfig): () => string {
  const read = secretSource(c.joinToken ? [c.joinToken] : [], c.joinTokenFile, { recheckMs: 0 });
  let token = read()[0];
  if (!token) {
    const file = c.joinTokenFile;
    logger.fatal(
      file === undefined ? {} : { file },
      file === undefined
        ? 'a join token is required (joinToken or joinTokenFile)'
        : `joinTokenFile ${file} holds no join token (missing, unreadable or empty): put one of the schedulers' joinTokens in it (runtime chart: the key joinToken.key of the Secret joinToken.existingSecret)`,
    );
    process.exit(1);
  }
  return () => (token = read()[0] ?? token!);
}

/** The sink `metering.sink` names; unset, Redis when a URL is given, else the log. */
function meteringSink(m: RuntimeConfig['metering']): MeteringSink {
  if (m.sink === 'none') return noMeteringSink();
  // The config refuses a URL beside sink log or none, and sink redis without one.
  if (m.redisUrl) {
    return redisMeteringSink({ url: m.redisUrl, stream: m.stream, queueLengthMax: m.queueLengthMax, logger, metrics });
  }
  return logMeteringSink(logger);
}

const direct = config.directListen;
/**
 * Schedulers and gateways hold their own tokens to 16 characters. Direct
 * tokens of any length are taken still (refusing them would cut off
 * deployments that run with one), with a warning, never naming the token.
 */
const DIRECT_TOKEN_LENGTH_ADVISED = 16;
const guessedEasily = 'gateways may present it, but a short token is guessed easily';
// Read again when the file changes: a rotation lists the old and the new token, then only the new one.
const directTokens = secretSource(direct.token ? [direct.token] : [], direct.tokenFile, {
  lengthAdvised: DIRECT_TOKEN_LENGTH_ADVISED,
  onShortKept: (file, count) =>
    logger.warn(
      { option: 'directListen.tokenFile', file, count },
      `directListen.tokenFile ${file}: ${count} token(s) shorter than ${DIRECT_TOKEN_LENGTH_ADVISED} characters; ${guessedEasily}`,
    ),
});
if (direct.enabled && direct.token !== undefined && direct.token.length < DIRECT_TOKEN_LENGTH_ADVISED) {
  logger.warn(
    { option: 'directListen.token' },
    `directListen.token is shorter than ${DIRECT_TOKEN_LENGTH_ADVISED} characters: ${guessedEasily}`,
  );
}
if (direct.enabled && directTokens().length === 0) {
  logger.fatal(
    {},
    'directListen.enabled requires directListen.token or a directListen.tokenFile listing one: the listener trusts identity headers',
  );
  process.exit(1);
}
if (direct.enabled && !direct.advertiseUrl && WILDCARD_HOSTS.includes(direct.host)) {
  logger.warn(
    { host: direct.host },
    'the direct listener advertises an address only this machine can dial: set directListen.advertiseUrl',
  );
}
const lifecycle = createLifecycle({ drainDelayMs: config.drainDelayMs, logger });
const metrics = createMetrics('runtime');
// Kubelet probes and Prometheus reach a runtime here, on its own pod, rather than through a scheduler whose
// tunnel may be the very thing that is down. /healthz answers while the process does (a runtime cut off from
// every scheduler is not helped by a restart); /readyz adds the tunnel (below), so a rollout waits for each
// new runtime to join. Up before the node, so that a liveness probe finds it while sandboxes start.
const health = healthListenerOn(config.health)
  ? createProbeServer({
      registry: metrics.registry,
      healthz: lifecycle.healthzHandler,
      readyz: lifecycle.readyzHandler,
    })
  : undefined;
const healthAddress = health
  ? await listen(health, config.health).catch((error: unknown) => exitOnListenError('switchyard-runtime', error))
  : undefined;
if (health) lifecycle.addServer(health);
const node = await startRuntimeNode({
  runtimeId: config.runtimeId,
  schedulerUrl: config.schedulerUrl,
  fallbackSchedulerUrls: config.fallbackSchedulerUrls,
  joinToken: joinTokenSource(config),
  classes: engineConfigs(config.classes),
  sandboxesMax: config.sandboxesMax,
  sessionIdleMs: config.sessionIdleMs,
  warmPoolRefillDelayMs: config.warmPoolRefillDelayMs,
  metadata: config.metadata,
  version: config.version,
  ...(config.sidecarPort > 0 ? { sidecarPort: config.sidecarPort } : {}),
  ...(direct.enabled
    ? {
        direct: {
          host: direct.host,
          port: direct.port,
          tokens: directTokens,
          connectionsMax: direct.connectionsMax,
          writeStallTimeoutMs: direct.writeStallTimeoutMs,
          ...(direct.advertiseUrl ? { advertiseUrl: direct.advertiseUrl } : {}),
        },
      }
    : {}),
  tunnelPingIntervalMs: config.tunnel.pingIntervalMs,
  tunnelTransport: config.tunnel.transport,
  meter: meteringSink(config.metering),
  logger,
  metrics,
}).catch((error: unknown) => exitOnListenError('switchyard-runtime', error));
lifecycle.addReadinessCheck(() => {
  if (node.connected) return undefined;
  return node.replaced ? 'replaced by another runtime with this id' : 'disconnected';
});
lifecycle.onDrain(() => node.drain());
lifecycle.onShutdown(() => node.close());
lifecycle.markReady();
lifecycle.installSignalHandlers();
logger.info(
  {
    runtime: node.runtimeId,
    scheduler: config.schedulerUrl,
    direct: node.directUrl,
    ...(node.sidecarUrl ? { sidecar: node.sidecarUrl } : {}),
    ...(healthAddress ? { health: `http://${urlHost(config.health.host)}:${healthAddress.port}` } : {}),
  },
  'ready',
);
