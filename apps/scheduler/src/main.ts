#!/usr/bin/env node
// switchyard-scheduler: one scheduler replica. Parses config, picks the lease
// backend, and hands everything else to @switchyard/scheduler.
import { createFileLock, createKubernetesLock, createMemoryLock, type LeaseLock } from '@switchyard/election';
import { startSchedulerReplica } from '@switchyard/scheduler';
import { createLifecycle, createLogger, createMetrics, loadConfig, secretSource } from '@switchyard/service';
import { schedulerConfigSchema, type SchedulerConfig } from './config.ts';

const config = loadConfig(schedulerConfigSchema, {
  argv: process.argv.slice(2),
  env: process.env,
  program: 'switchyard-scheduler',
});
const logger = createLogger({ name: 'scheduler', level: config.logLevel });

async function leaseLock(election: SchedulerConfig['election']): Promise<LeaseLock> {
  if (election.backend === 'memory') return createMemoryLock();
  if (election.backend === 'file') {
    if (!election.leaseFile) throw new Error('election.leaseFile is required with the file backend');
    return createFileLock(election.leaseFile);
  }
  // Imported for this backend only: the client costs a second of start and
  // tens of MB, which the memory and file backends never need.
  const { KubeConfig } = await import('@kubernetes/client-node');
  const kubeConfig = new KubeConfig();
  if (election.kubeconfig) kubeConfig.loadFromFile(election.kubeconfig);
  else kubeConfig.loadFromCluster();
  return createKubernetesLock({ kubeConfig, namespace: election.namespace, name: election.leaseName });
}

const joinTokens = secretSource(config.joinTokens, config.joinTokenFile);
if (joinTokens().length === 0) logger.warn({}, 'no join tokens configured: no runtime can join until one is');

const lifecycle = createLifecycle({ drainDelayMs: config.drainDelayMs, logger });
const replica = await startSchedulerReplica({
  replicaId: config.replicaId,
  advertiseUrl: config.advertiseUrl ?? 'http://127.0.0.1:{port}',
  host: config.host,
  port: config.port,
  lock: await leaseLock(config.election),
  election: {
    leaseDurationMs: config.election.leaseDurationMs,
    renewDeadlineMs: config.election.renewDeadlineMs,
    retryPeriodMs: config.election.retryPeriodMs,
    jitterFactor: config.election.jitterFactor,
  },
  joinTokens,
  maxRuntimes: config.maxRuntimes,
  tunnelPingIntervalMs: config.tunnel.pingIntervalMs,
  epoch: config.epoch,
  probes: { healthz: lifecycle.healthzHandler, readyz: lifecycle.readyzHandler },
  logger,
  metrics: createMetrics('scheduler'),
});
lifecycle.onShutdown(() => replica.close());
lifecycle.markReady();
lifecycle.installSignalHandlers();
// One parseable line for supervisors and scripts that start replicas on port 0.
logger.info({ replica: replica.replicaId, url: replica.url, port: replica.port }, 'ready');
