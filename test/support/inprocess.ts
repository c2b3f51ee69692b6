// A cluster inside the test process: scheduler replicas on one in-memory
// lease with tuned-down timings, and builtin-engine runtime nodes, all on
// loopback port 0. For suites where process isolation adds nothing but time
// (the live page, the fuzzers); the code under test is the apps' own.
import { MemoryLeaseStore, createMemoryLock } from '@switchyard/election';
import { startRuntimeNode, type RuntimeNode } from '@switchyard/runtime';
import { startSchedulerReplica, type SchedulerReplica, type SchedulerReplicaOptions } from '@switchyard/scheduler';
import { createMetrics } from '@switchyard/service';

export const IN_PROCESS_TOKEN = 'in-process-join-token-0123456789';

const quiet = { debug() {}, info() {}, warn() {}, error() {} };

/** `count` replicas `s0…` sharing one memory lease (`store`, when the test reaches into it); `extra` options for each. */
export async function startReplicas(
  count: number,
  extra: Partial<SchedulerReplicaOptions> = {},
  store = new MemoryLeaseStore(),
): Promise<SchedulerReplica[]> {
  const replicas: SchedulerReplica[] = [];
  for (let i = 0; i < count; i++) {
    replicas.push(
      await startSchedulerReplica({
        replicaId: `s${i}`,
        advertiseUrl: 'http://127.0.0.1:{port}',
        host: '127.0.0.1',
        port: 0,
        lock: createMemoryLock(store),
        election: { leaseDurationMs: 1500, renewDeadlineMs: 1000, retryPeriodMs: 200 },
        epoch: { cycleIntervalMs: 200 },
        joinTokens: () => [IN_PROCESS_TOKEN],
        tunnelPingIntervalMs: 300,
        logger: quiet,
        metrics: createMetrics('scheduler'),
        ...extra,
      }),
    );
  }
  return replicas;
}

/** A runtime serving the `demo` class, joined to `schedulerUrl`; resolves once its tunnel is up. */
export async function startRuntime(id: string, schedulerUrl: string): Promise<RuntimeNode> {
  const node = await startRuntimeNode({
    runtimeId: id,
    schedulerUrl,
    joinToken: IN_PROCESS_TOKEN,
    classes: { demo: { engine: 'builtin' } },
    sandboxesMax: 10,
    sessionIdleMs: 60_000,
    tunnelPingIntervalMs: 300,
    logger: quiet,
    metrics: createMetrics('runtime'),
  });
  await node.whenConnected();
  return node;
}
