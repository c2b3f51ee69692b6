// In-process targets for the fuzzers: real scheduler replicas (memory lease,
// fast timings) and a real runtime node, on loopback port 0. In-process keeps
// ten thousand cases per target within seconds; the code under test is the
// same server code the apps run.
import type { RuntimeNode } from '@switchyard/runtime';
import type { SchedulerReplica } from '@switchyard/scheduler';
import { IN_PROCESS_TOKEN, startReplicas, startRuntime } from '../support/inprocess.ts';
import { until } from '../support/processes.ts';

export const TOKEN = IN_PROCESS_TOKEN;

/** Seed of every fuzz run; FUZZ_SEED overrides it to explore further. */
export const FUZZ_SEED = Number(process.env.FUZZ_SEED ?? 20_261_129);

export interface FuzzCluster {
  readonly replicas: SchedulerReplica[];
  readonly runtime: RuntimeNode;
  /** Epoch info of a replica (throws on a non-200). */
  epoch(i: number): Promise<{ epoch: number | null; term: number; isLeader: boolean }>;
  /** Throws unless every replica answers /api/epoch and lists the runtime as available. */
  assertHealthy(): Promise<void>;
  close(): Promise<void>;
}

/** `count` replicas sharing one memory lease, and runtime `r0` dialled into replica 0. */
export async function startFuzzCluster(count = 2): Promise<FuzzCluster> {
  const replicas = await startReplicas(count);
  const runtime = await startRuntime('r0', replicas[0]!.url);
  const epoch = async (i: number) => {
    const res = await fetch(`${replicas[i]!.url}/api/epoch`, { signal: AbortSignal.timeout(5000) });
    if (res.status !== 200) throw new Error(`s${i} /api/epoch answered ${res.status}`);
    return (await res.json()) as { epoch: number | null; term: number; isLeader: boolean };
  };
  const available = async (i: number): Promise<boolean> => {
    const res = await fetch(`${replicas[i]!.url}/api/runtimes`, { signal: AbortSignal.timeout(5000) });
    const body = (await res.json()) as { runtimes: Array<{ id: string; available: boolean }> };
    return body.runtimes.some((r) => r.id === 'r0' && r.available);
  };
  const assertHealthy = async (): Promise<void> => {
    await until('r0 available on every replica', async () => {
      for (let i = 0; i < replicas.length; i++) if (!(await available(i))) return undefined;
      return true;
    });
  };
  let closing: Promise<void> | undefined;
  const cluster: FuzzCluster = {
    replicas,
    runtime,
    epoch,
    assertHealthy,
    close: () =>
      (closing ??= (async () => {
        await runtime.close();
        await Promise.all(replicas.map((r) => r.close()));
      })()),
  };
  try {
    await assertHealthy();
  } catch (error) {
    await cluster.close();
    throw error;
  }
  return cluster;
}

/** Runs `check` over `cases` with `parallel` workers (each told its index); returns the failures (bounded). */
export async function runCases<T>(
  cases: readonly T[],
  parallel: number,
  check: (c: T, worker: number) => Promise<string | undefined>,
  failuresMax = 20,
): Promise<Array<{ input: T; failure: string }>> {
  const failures: Array<{ input: T; failure: string }> = [];
  let next = 0;
  const worker = async (index: number): Promise<void> => {
    while (next < cases.length && failures.length < failuresMax) {
      const input = cases[next++]!;
      let failure: string | undefined;
      try {
        failure = await check(input, index);
      } catch (error) {
        failure = `threw: ${(error as Error).message}`;
      }
      if (failure !== undefined) failures.push({ input, failure });
    }
  };
  await Promise.all(Array.from({ length: parallel }, (_, i) => worker(i)));
  return failures;
}

/** One line per failure, with the input as JSON so it can be pasted into a regressions table. */
export function describeFailures(failures: ReadonlyArray<{ input: unknown; failure: string }>): string {
  return failures
    .map(
      ({ input, failure }) =>
        `${failure}\n  input: ${JSON.stringify(input, (_k, v) => (v instanceof Uint8Array ? Buffer.from(v).toString('base64') : v))}`,
    )
    .join('\n');
}
