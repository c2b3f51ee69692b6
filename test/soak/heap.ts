// Heap sampling over HTTP: every app serves prom-client's default metrics at
// /metrics (runtimes through any scheduler's /api/proxy/<id>/metrics), among
// them `switchyard_<app>_nodejs_heap_size_used_bytes`. Under steady load the
// collector runs often, so the lowest heap seen in a window is close to the
// live heap: a leak raises that floor, a plateau of V8's heap capacity (which
// is what RSS shows in a short run) does not.
import type { RssSeries } from './rss.ts';

const HEAP_USED = /^switchyard_[a-z]+_nodejs_heap_size_used_bytes (\d+(?:\.\d+)?(?:e\+\d+)?)$/m;

export async function heapUsedBytes(metricsUrl: string): Promise<number | undefined> {
  try {
    const res = await fetch(metricsUrl, { signal: AbortSignal.timeout(2000) });
    const match = HEAP_USED.exec(await res.text());
    return match ? Number(match[1]) : undefined;
  } catch {
    return undefined;
  }
}

/** Samples the heap of every target every `intervalMs` until stopped (bounded, like sampleRss). */
export function sampleHeap(
  targets: ReadonlyArray<{ name: string; metricsUrl: string }>,
  intervalMs = 1000,
  samplesMax = 3600,
) {
  const startMs = performance.now();
  const series: RssSeries[] = targets.map(({ name }) => ({ name, pid: 0, samples: [] }));
  const tick = async (): Promise<void> => {
    const atMs = performance.now() - startMs;
    const values = await Promise.all(targets.map((t) => heapUsedBytes(t.metricsUrl)));
    values.forEach((bytes, i) => {
      if (bytes === undefined) return;
      const samples = series[i]!.samples;
      samples.push({ atMs, bytes });
      if (samples.length > samplesMax) samples.shift();
    });
  };
  const timer = setInterval(() => void tick(), intervalMs);
  timer.unref();
  return {
    series,
    stop(): RssSeries[] {
      clearInterval(timer);
      return series;
    },
  };
}

/** Rise of the lowest sample from the first to the second half of the post-warm-up window. */
export function floorGrowthAfter(
  series: readonly RssSeries[],
  warmupMs: number,
): Array<{ name: string; floorGrowthBytes: number; firstFloorBytes: number; secondFloorBytes: number }> {
  return series.map(({ name, samples }) => {
    const after = samples.filter((s) => s.atMs >= warmupMs).map((s) => s.bytes);
    if (after.length < 4)
      throw new Error(`${name}: too few heap samples after the ${warmupMs} ms warm-up (${after.length})`);
    const half = Math.floor(after.length / 2);
    const firstFloorBytes = Math.min(...after.slice(0, half));
    const secondFloorBytes = Math.min(...after.slice(half));
    return {
      name,
      firstFloorBytes,
      secondFloorBytes,
      floorGrowthBytes: Math.max(0, secondFloorBytes - firstFloorBytes),
    };
  });
}
