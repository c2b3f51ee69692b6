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

/** Growth of one process: last-window maximum over the post-warm-up minimum. */
export interface RssGrowth {
  readonly name: string;
  readonly minAfterWarmupBytes: number;
  readonly maxAfterWarmupBytes: number;
  readonly lastBytes: number;
  /** max − min after the warm-up: what the bound is checked against. */
  readonly growthBytes: number;
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
    return {
      name,
      minAfterWarmupBytes: min,
      maxAfterWarmupBytes: max,
      lastBytes: after.at(-1)!,
      growthBytes: max - min,
    };
  });
}
