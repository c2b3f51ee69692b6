// Shared helpers of the cluster acceptance suite: the fake Lease API cluster,
// schedule calls, and a sampler that records every replica's epoch/term so a
// test can assert they never went backwards.
import { startFakeLeaseApi, type FakeLeaseApi } from '../fakes/lease-api.ts';
import { startCluster, type ClusterOptions, type TestCluster } from '../support/cluster.ts';
import type { AppProcess } from '../support/processes.ts';

export interface EpochInfo {
  readonly replica: string;
  readonly epoch: number | null;
  readonly term: number;
  readonly isLeader: boolean;
  readonly leader: { id: string; url: string } | null;
}

export interface LeaseCluster {
  readonly fake: FakeLeaseApi;
  readonly cluster: TestCluster;
  /** Stops every process, then the fake. Idempotent. */
  close(): Promise<void>;
}

/** A cluster electing through the fake Kubernetes Lease API, served by this test process. */
export async function startLeaseCluster(options: Omit<ClusterOptions, 'lease'> = {}): Promise<LeaseCluster> {
  const fake = await startFakeLeaseApi();
  let cluster: TestCluster;
  try {
    cluster = await startCluster({ ...options, lease: { kubernetesUrl: fake.url } });
  } catch (error) {
    await fake.close();
    throw error;
  }
  let closing: Promise<void> | undefined;
  return { fake, cluster, close: () => (closing ??= cluster.stop().finally(() => fake.close())) };
}

export function isAlive(p: AppProcess): boolean {
  return p.child.exitCode === null && p.child.signalCode === null;
}

export async function getEpoch(url: string, timeoutMs = 2000): Promise<EpochInfo> {
  const res = await fetch(`${url}/api/epoch`, { signal: AbortSignal.timeout(timeoutMs) });
  if (res.status !== 200) throw new Error(`${url}/api/epoch answered ${res.status}`);
  return (await res.json()) as EpochInfo;
}

export interface ScheduleAnswer {
  readonly status: number;
  readonly body: Record<string, unknown>;
}

export async function schedule(url: string, request: unknown, timeoutMs = 3000): Promise<ScheduleAnswer> {
  const res = await fetch(`${url}/api/schedule`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: typeof request === 'string' ? request : JSON.stringify(request),
    signal: AbortSignal.timeout(timeoutMs),
  });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

export interface Sample {
  readonly atMs: number;
  readonly replica: string;
  readonly epoch: number;
  readonly term: number;
}

/**
 * Polls `/api/epoch` of the given replicas every `intervalMs` until stopped.
 * Unreachable replicas are skipped (a killed one simply stops reporting).
 * Samples are bounded; the oldest are dropped past `samplesMax`.
 */
export function sampleEpochs(urls: readonly string[], intervalMs = 50, samplesMax = 20_000) {
  const samples: Sample[] = [];
  let stopped = false;
  const loop = (async () => {
    while (!stopped) {
      await Promise.all(
        urls.map(async (url) => {
          const info = await getEpoch(url, 500).catch(() => undefined);
          if (!info || info.epoch === null) return;
          samples.push({ atMs: performance.now(), replica: info.replica, epoch: info.epoch, term: info.term });
          if (samples.length > samplesMax) samples.shift();
        }),
      );
      await new Promise((resolve) => setTimeout(resolve, intervalMs));
    }
  })();
  return {
    samples,
    async stop(): Promise<Sample[]> {
      stopped = true;
      await loop;
      return samples;
    },
  };
}

/** Per replica, the first place its (term, epoch) went down; undefined when both only rose. */
export function firstRegression(samples: readonly Sample[]): string | undefined {
  const last = new Map<string, Sample>();
  for (const s of samples) {
    const prev = last.get(s.replica);
    if (prev && (s.term < prev.term || s.epoch < prev.epoch)) {
      return `${s.replica}: term/epoch ${prev.term}/${prev.epoch} then ${s.term}/${s.epoch}`;
    }
    last.set(s.replica, s);
  }
  return undefined;
}

/** Deterministic pseudo-random ids for request tables (the test stays reproducible). */
export function idStream(seed: number): () => string {
  let x = seed >>> 0 || 1;
  return () => {
    x ^= x << 13;
    x >>>= 0;
    x ^= x >>> 17;
    x ^= x << 5;
    x >>>= 0;
    return x.toString(36);
  };
}
