// Failover phase: scheduler replicas as OS processes (file lease), the leader
// killed with SIGKILL, and the time until any survivor holds a commit of a
// higher term. The killed replica is restarted on its port between samples so
// every sample starts from three synced replicas. A killed leader never
// releases its lease, so the figure is dominated by the lease duration: the
// survivors must wait for it to expire, then take it on a retry tick.
import { epochOf, startCluster, type TestCluster } from '../../support/cluster.ts';
import { until } from '../../support/processes.ts';
import { percentile, progress, type Figure } from '../report.ts';

export interface ElectionSettings {
  readonly leaseDurationMs: number;
  readonly renewDeadlineMs: number;
  readonly retryPeriodMs: number;
}

const POLL_MS = 10;

/** Waits until every replica reports an epoch of `term` or later, so the next sample starts settled. */
async function settled(cluster: TestCluster, term: number, timeoutMs: number): Promise<void> {
  await until(
    `every replica on term ${term}`,
    async () => {
      const infos = await Promise.all(cluster.schedulerUrls().map((u) => epochOf(u)));
      return infos.every((i) => i.epoch !== null && i.term >= term) || undefined;
    },
    timeoutMs,
  );
}

/** Time from the kill to the first commit of a higher term on any survivor, ms. */
async function killLeaderOnce(
  cluster: TestCluster,
  timeoutMs: number,
): Promise<{ ms: number; index: number; term: number }> {
  const leader = await cluster.leader();
  const index = cluster.schedulers.indexOf(leader);
  const { term } = await epochOf(leader.url!);
  const survivors = cluster.schedulers.filter((s) => s !== leader).map((s) => s.url!);
  const killedAt = performance.now();
  leader.signal('SIGKILL');
  for (;;) {
    const infos = await Promise.all(survivors.map((u) => epochOf(u).catch(() => undefined)));
    const next = infos.find((i) => i && i.epoch !== null && i.term > term);
    if (next) return { ms: performance.now() - killedAt, index, term: next.term };
    if (performance.now() - killedAt > timeoutMs)
      throw new Error(`no commit of a term above ${term} within ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, POLL_MS));
  }
}

/**
 * Kills the leader `samples` times under `election` settings; figures are
 * named `failover_kill9_<label>_*`. Each sample is bounded by the lease
 * duration plus a margin, so a stuck election fails the bench instead of
 * hanging it.
 */
export async function measureFailover(label: string, election: ElectionSettings, samples: number): Promise<Figure[]> {
  const sampleTimeoutMs = election.leaseDurationMs + 4 * election.retryPeriodMs + 10_000;
  progress(
    `failover (${label}: lease ${election.leaseDurationMs} / renew ${election.renewDeadlineMs} / ` +
      `retry ${election.retryPeriodMs} ms): starting 3 replicas, ${samples} samples`,
  );
  const cluster = await startCluster({ schedulers: 3, runtimes: 1, gateways: 0, election, tunnelPingIntervalMs: 5000 });
  const times: number[] = [];
  try {
    for (let i = 0; i < samples; i++) {
      const { term } = await epochOf((await cluster.leader()).url!);
      await settled(cluster, term, sampleTimeoutMs);
      const sample = await killLeaderOnce(cluster, sampleTimeoutMs);
      times.push(sample.ms);
      progress(
        `failover ${label} sample ${i + 1}/${samples}: term ${term} → ${sample.term} in ${sample.ms.toFixed(0)} ms`,
      );
      await cluster.restartScheduler(sample.index);
      await settled(cluster, sample.term, sampleTimeoutMs);
    }
  } finally {
    await cluster.stop();
  }
  times.sort((a, b) => a - b);
  return [
    { metric: `failover_kill9_${label}_p50`, value: Math.round(percentile(times, 50)), unit: 'ms' },
    { metric: `failover_kill9_${label}_max`, value: Math.round(times.at(-1)!), unit: 'ms' },
  ];
}
