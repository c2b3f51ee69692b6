// RSS sampling of OS processes from /proc/<pid>/status (Linux only). The
// soak suite samples every process of a cluster on an interval and judges
// growth against the minimum seen after a warm-up, so start-up allocation
// (JIT, first sessions, V8 heap sizing) does not count as a leak.
import { readFileSync } from 'node:fs';

/** Resident set size of `pid` in bytes, or undefined when the process is gone. */
export function rssBytes(pid: number): number | undefined {
  try {
    const status = readFileSync(`/proc/${pid}/status`, 'utf8');
    const match = /^VmRSS:\s+(\d+)\s+kB$/m.exec(status);
    return match ? Number(match[1]) * 1024 : undefined;
  } catch {
    return undefined;
  }
}

export interface RssSample {
  readonly atMs: number;
  readonly bytes: number;
}

export interface RssSeries {
  readonly name: string;
  readonly pid: number;
  readonly samples: RssSample[];
}

/** Growth of one process after the warm-up. */
export interface RssGrowth {
  readonly name: string;
  readonly minAfterWarmupBytes: number;
  readonly maxAfterWarmupBytes: number;
  readonly lastBytes: number;
  /** max − min after the warm-up (includes the climb to the allocator's plateau). */
  readonly growthBytes: number;
  /**
   * Maximum of the second half of the post-warm-up samples minus the maximum
   * of the first half: what the bound is checked against. A plateau (heap and
   * allocator arenas sized for the load) scores about 0; a leak keeps growing
   * and scores its growth over half the run.
   */
  readonly lateGrowthBytes: number;
  /** RSS at ten evenly spaced samples after the warm-up, for the record. */
  readonly profileBytes: readonly number[];
}

/**
 * Samples every process every `intervalMs` until stopped. Series are bounded
 * to `samplesMax` each (oldest dropped), enough for an hour at 1 Hz.
 */
export function sampleRss(
  processes: ReadonlyArray<{ name: string; pid: number }>,
  intervalMs = 1000,
  samplesMax = 3600,
) {
  const startMs = performance.now();
  const series: RssSeries[] = processes.map(({ name, pid }) => ({ name, pid, samples: [] }));
  const tick = (): void => {
    const atMs = performance.now() - startMs;
    for (const s of series) {
      const bytes = rssBytes(s.pid);
      if (bytes === undefined) continue;
      s.samples.push({ atMs, bytes });
      if (s.samples.length > samplesMax) s.samples.shift();
    }
  };
  tick();
  const timer = setInterval(tick, intervalMs);
  timer.unref();
  return {
    series,
    stop(): RssSeries[] {
      clearInterval(timer);
      tick();
      return series;
    },
  };
}

/** Growth per process, counting only samples taken at or after `warmupMs`. */
export function growthAfter(series: readonly RssSeries[], warmupMs: number): RssGrowth[] {
  return series.map(({ name, samples }) => {
    const after = samples.filter((s) => s.atMs >= warmupMs).map((s) => s.bytes);
    if (after.length === 0) throw new Error(`${name}: no RSS sample after the ${warmupMs} ms warm-up`);
    const min = Math.min(...after);
    const max = Math.max(...after);
    const half = Math.floor(after.length / 2);
    const firstMax = Math.max(...after.slice(0, Math.max(1, half)));
    const secondMax = Math.max(...after.slice(half));
    const profileBytes = Array.from({ length: 10 }, (_, i) => after[Math.floor((i * (after.length - 1)) / 9)]!);
    return {
      name,
      minAfterWarmupBytes: min,
      maxAfterWarmupBytes: max,
      lastBytes: after.at(-1)!,
      growthBytes: max - min,
      lateGrowthBytes: Math.max(0, secondMax - firstMax),
      profileBytes,
    };
  });
}
