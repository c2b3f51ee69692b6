// Shared output of benchmark suites. Progress goes to stderr; the headline
// figures go to stdout as one JSON line each, a contract relied on outside
// this repository: {"bench":"<suite>","metric":"<name>","value":<n>,"unit":"<u>"}.

export interface Figure {
  readonly metric: string;
  readonly value: number;
  readonly unit: string;
}

export function progress(message: string): void {
  process.stderr.write(`  ${message}\n`);
}

export function report(suite: string, figures: readonly Figure[]): void {
  for (const { metric, value, unit } of figures) {
    const rounded = Number.isInteger(value) ? value : Number(value.toPrecision(4));
    process.stdout.write(`${JSON.stringify({ bench: suite, metric, value: rounded, unit })}\n`);
  }
}

/** Percentile of already-sorted samples (nearest rank). */
export function percentile(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) return Number.NaN;
  const rank = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[rank]!;
}
