#!/usr/bin/env node
// switchyard-scheduler: one scheduler replica. Parses config, picks the lease
// backend, and hands everything else to @switchyard/scheduler.
import { createFileLock, createKubernetesLock, createMemoryLock, type LeaseLock } from '@switchyard/election';
import { startSchedulerReplica, unscopedJoinTokens } from '@switchyard/scheduler';
import {
  ConfigError,
  createLifecycle,
  createLogger,
  createMetrics,
  createProbeServer,
  listen,
  loadAppConfig,
  secretSource,
  exitOnListenError,
  appTls,
  urlHost,
  WILDCARD_HOSTS,
} from '@switchyard/service';
import { TOKEN_LENGTH_MIN, schedulerConfigSchema, type SchedulerConfig } from './config.ts';

/**
 * Where peers and gateways dial a replica not told its URL: the one address it listens on (a replica bound to
 * ::1 or 10.0.0.7 is not on 127.0.0.1), or 127.0.0.1 when it listens on every interface (Node's `::` listener
 * takes IPv4 too).
 */
function defaultAdvertiseHost(host: string): string {
  return WILDCARD_HOSTS.includes(host) ? '127.0.0.1' : urlHost(host);
}

/** What each lease backend needs besides its own keys, checked before anything starts. */
function checkElection(config: SchedulerConfig): SchedulerConfig {
  const { backend, leaseFile, kubeconfig } = config.election;
  if (backend === 'file' && !leaseFile) {
    throw new ConfigError('invalid configuration', ['election.leaseFile: required with the file backend']);
  }
  // In a pod the service account is found through this variable; anywhere else a kubeconfig is needed.
  if (backend === 'kubernetes' && !kubeconfig && !process.env.KUBERNETES_SERVICE_HOST) {
    throw new ConfigError('invalid configuration', [
      'election.kubeconfig: required outside a Kubernetes pod (KUBERNETES_SERVICE_HOST is not set)',
    ]);
  }
  return config;
}

const config = loadAppConfig(schedulerConfigSchema, {
  argv: process.argv.slice(2),
  env: process.env,
  program: 'switchyard-scheduler',
  derive: checkElection,
});
const logger = createLogger({ name: 'scheduler', level: config.logLevel });

async function leaseLock(election: SchedulerConfig['election']): Promise<LeaseLock> {
  if (election.backend === 'memory') return createMemoryLock();
  // checkElection made sure the file backend has its file.
  if (election.backend === 'file') return createFileLock(election.leaseFile!);
  // Imported for this backend only: the client costs a second of start and
  // tens of MB, which the memory and file backends never need.
  const { KubeConfig } = await import('@kubernetes/client-node');
  const kubeConfig = new KubeConfig();
  if (election.kubeconfig) kubeConfig.loadFromFile(election.kubeconfig);
  else kubeConfig.loadFromCluster();
  return createKubernetesLock({ kubeConfig, namespace: election.namespace, name: election.leaseName });
}

/**
 * Tokens from the option and its file, held to the length the schema holds
 * the option to: a short line in the file is left out (read again when the
 * file changes), and the file is named in a warning each time it has some.
 */
function tokens(
  option: 'joinTokens' | 'peerTokens' | 'apiTokens',
  file: 'joinTokenFile' | 'peerTokenFile' | 'apiTokenFile',
) {
  return secretSource(config[option], config[file], {
    lengthMin: TOKEN_LENGTH_MIN,
    onShort: (path, count) =>
      logger.warn(
        { file: path, option: file, count },
        `${file} ${path}: ${count} token(s) shorter than ${TOKEN_LENGTH_MIN} characters left out`,
      ),
  });
}

/**
 * `read`, calling `warn` whenever the list it returns is empty and was not
 * the last time: at start, and at each change of its file, so that a Secret
 * emptied by mistake while the replica runs is in the log too, once.
 */
function warnWhenEmpty(read: () => readonly string[], warn: () => void): () => readonly string[] {
  let last: readonly string[] | undefined;
  return () => {
    const current = read();
    if (current !== last && current.length === 0) warn();
    last = current;
    return current;
  };
}

/**
 * Join token lines whose token (before a runtime id pattern) is long enough: `secretSource` measures whole
 * lines, and a short token with a pattern after it would pass there. Derived once per list (a list keeps its
 * identity until its file changes).
 */
function longJoinTokens(read: () => readonly string[]): () => readonly string[] {
  let seen: readonly string[] | undefined;
  let kept: readonly string[] = [];
  return () => {
    const lines = read();
    if (lines === seen) return kept;
    seen = lines;
    kept = lines.filter((line) => (line.trim().split(/\s+/)[0] ?? '').length >= TOKEN_LENGTH_MIN);
    const short = lines.length - kept.length;
    if (short > 0) {
      const file = config.joinTokenFile;
      logger.warn(
        { file, option: 'joinTokenFile', count: short },
        `joinTokenFile ${file}: ${short} token(s) shorter than ${TOKEN_LENGTH_MIN} characters left out`,
      );
    }
    return kept;
  };
}

const joinTokens = warnWhenEmpty(longJoinTokens(tokens('joinTokens', 'joinTokenFile')), () =>
  logger.warn({ file: config.joinTokenFile }, 'no join tokens configured: no runtime can join until one is'),
);
joinTokens();

/**
 * Tokens that are wanted once given: listed, or a file named, whatever the file holds now (emptied or missing
 * by mistake, it must not open what it guards: the API to whoever reaches the port, the sync to runtimes' join
 * tokens). Undefined when not given, after `unset` said what that means; else the reader, which warns with
 * `fileEmpty` whenever it comes to list none.
 */
function wantedTokens(
  option: 'peerTokens' | 'apiTokens',
  file: 'peerTokenFile' | 'apiTokenFile',
  fileEmpty: string,
  unset: () => void,
): (() => readonly string[]) | undefined {
  if (config[option].length === 0 && config[file] === undefined) return void unset();
  const read = warnWhenEmpty(tokens(option, file), () => logger.warn({ file: config[file] }, fileEmpty));
  read();
  return read;
}

/** Without peer tokens, join tokens with no runtime id pattern admit peers; scoped ones never do. */
const ALL_JOIN_TOKENS_SCOPED =
  'no peer tokens configured, and every join token is scoped to runtime ids: no replica syncs epochs with this one (a scoped token admits no peer); set peerTokens (or peerTokenFile) on every replica';
const allScoped = (lines: readonly string[]): boolean => lines.length > 0 && unscopedJoinTokens(lines).length === 0;

/**
 * Join tokens that also admit peers (no peer tokens given), warning whenever the file comes to hold only
 * scoped ones: the replicas of a cluster then stop syncing epochs, which nothing else would say.
 */
function warnWhenNoPeerStandIn(read: () => readonly string[]): () => readonly string[] {
  let last = read();
  return () => {
    const current = read();
    if (current !== last && allScoped(current)) logger.warn({ option: 'peerTokens' }, ALL_JOIN_TOKENS_SCOPED);
    last = current;
    return current;
  };
}

const peerTokens = wantedTokens(
  'peerTokens',
  'peerTokenFile',
  'peerTokenFile lists no peer token: no replica syncs epochs with this one until it does',
  () =>
    logger.warn(
      { option: 'peerTokens' },
      allScoped(joinTokens())
        ? ALL_JOIN_TOKENS_SCOPED
        : "no peer tokens configured: runtimes' join tokens admit peers to epoch sync, so a runtime's token can report runtimes; set peerTokens (or peerTokenFile) on every replica",
    ),
);
const apiTokens = wantedTokens(
  'apiTokens',
  'apiTokenFile',
  'apiTokenFile lists no API token: the scheduler API refuses every caller until it does',
  () => logger.info({}, 'no API tokens configured: the scheduler API is open to whoever reaches this port'),
);

const tls = appTls('switchyard-scheduler', config.tls, logger);

const lifecycle = createLifecycle({ drainDelayMs: config.drainDelayMs, logger });
const metrics = createMetrics('scheduler');
// Not /readyz: a replica whose port is full cannot take the connections readiness sends it, and a probe
// refused there turns it unready, which is right; a liveness probe refused for 30 s gets it restarted.
const probeServer =
  config.metricsPort === undefined
    ? undefined
    : createProbeServer({ registry: metrics.registry, healthz: lifecycle.healthzHandler });
// Up before the replica, so that a liveness probe finds it while the replica starts.
const probeAddress =
  probeServer &&
  (await listen(probeServer, { host: config.host, port: config.metricsPort ?? 0 }).catch((error: unknown) =>
    exitOnListenError('switchyard-scheduler', error),
  ));
if (probeServer) lifecycle.addServer(probeServer);
const replica = await startSchedulerReplica({
  replicaId: config.replicaId,
  advertiseUrl: config.advertiseUrl ?? `${tls ? 'https' : 'http'}://${defaultAdvertiseHost(config.host)}:{port}`,
  ...(tls ? { tls: tls.pair } : {}),
  host: config.host,
  port: config.port,
  lock: await leaseLock(config.election),
  election: {
    leaseDurationMs: config.election.leaseDurationMs,
    renewDeadlineMs: config.election.renewDeadlineMs,
    retryPeriodMs: config.election.retryPeriodMs,
    jitterFactor: config.election.jitterFactor,
  },
  joinTokens: peerTokens ? joinTokens : warnWhenNoPeerStandIn(joinTokens),
  ...(peerTokens ? { peerTokens } : {}),
  ...(apiTokens ? { apiTokens } : {}),
  maxRuntimes: config.maxRuntimes,
  runtimeState: config.runtimeState,
  connectionsMax: config.connectionsMax,
  tunnelPingIntervalMs: config.tunnel.pingIntervalMs,
  gatewayPingIntervalMs: config.gatewayPingIntervalMs,
  gatewayPingTimeoutMs: config.gatewayPingIntervalMs,
  writeStallTimeoutMs: config.writeStallTimeoutMs,
  epoch: config.epoch,
  probes: { healthz: lifecycle.healthzHandler, readyz: lifecycle.readyzHandler },
  logger,
  metrics,
}).catch((error: unknown) => exitOnListenError('switchyard-scheduler', error));
// Peers (epoch sync, proxy hops) and gateways (schedule answers name the owner) dial the advertised URL: a replica
// listening on every interface is meant to be reached from other machines, which 127.0.0.1 is not.
if (config.advertiseUrl === undefined && WILDCARD_HOSTS.includes(config.host)) {
  logger.warn(
    { host: config.host, url: replica.url },
    `this replica advertises ${replica.url}, an address only this machine can dial: set advertiseUrl (e.g. http://<pod IP>:<port>) when peers or gateways run elsewhere`,
  );
}
lifecycle.onShutdown(() => replica.close());
if (tls) lifecycle.onShutdown(tls.watch((pair) => replica.updateTls(pair)));
lifecycle.markReady();
lifecycle.installSignalHandlers();
// One parseable line for supervisors and scripts that start replicas on port 0.
logger.info(
  {
    replica: replica.replicaId,
    url: replica.url,
    port: replica.port,
    ...(probeAddress ? { metrics: `http://${urlHost(config.host)}:${probeAddress.port}/metrics` } : {}),
  },
  'ready',
);
