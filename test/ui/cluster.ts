// An in-process cluster for the live page tests: scheduler replicas on an
// in-memory lease with tuned-down timings, and builtin-engine runtimes.
export { startReplicas, startRuntime } from '../support/inprocess.ts';

/** Polls `probe` every 25 ms until it returns a truthy value; fails with `what` after `timeoutMs`. */
export async function until<T>(what: string, probe: () => Promise<T> | T, timeoutMs = 5000): Promise<NonNullable<T>> {
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value) return value as NonNullable<T>;
    if (performance.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

export interface EpochInfo {
  replica: string;
  epoch: number | null;
  epochAgeMs: number | null;
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
