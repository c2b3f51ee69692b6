// An in-process cluster for the live page tests: scheduler replicas on an
// in-memory lease with tuned-down timings, and builtin-engine runtimes.
import { MemoryLeaseStore, createMemoryLock } from '@switchyard/election';
import { startRuntimeNode, type RuntimeNode } from '@switchyard/runtime';
import { startSchedulerReplica, type SchedulerReplica } from '@switchyard/scheduler';
import { createMetrics } from '@switchyard/service';

const TOKEN = 'ui-test-join-token-0123456789';
const quiet = { debug() {}, info() {}, warn() {}, error() {} };

export async function startReplicas(count: number): Promise<SchedulerReplica[]> {
  const store = new MemoryLeaseStore();
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
        joinTokens: () => [TOKEN],
        tunnelPingIntervalMs: 300,
        logger: quiet,
        metrics: createMetrics('scheduler'),
      }),
    );
  }
  return replicas;
}

export async function startRuntime(id: string, schedulerUrl: string): Promise<RuntimeNode> {
  const node = await startRuntimeNode({
    runtimeId: id,
    schedulerUrl,
    joinToken: TOKEN,
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

/** Polls `probe` every 25 ms until it returns a truthy value; fails with `what` after `timeoutMs`. */
export async function until<T>(what: string, probe: () => Promise<T> | T, timeoutMs = 5000): Promise<NonNullable<T>> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value) return value as NonNullable<T>;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

export interface EpochInfo {
  replica: string;
  epoch: number | null;
  term: number;
  isLeader: boolean;
  leader: { id: string; url: string } | null;
}

export async function epochOf(url: string): Promise<EpochInfo> {
  return (await (await fetch(`${url}/api/epoch`)).json()) as EpochInfo;
}

export async function runtimeIds(url: string): Promise<string[]> {
  const body = (await (await fetch(`${url}/api/runtimes`)).json()) as { runtimes: Array<{ id: string }> };
  return body.runtimes.map((r) => r.id).sort();
}
