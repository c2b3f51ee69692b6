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

// ---- Report generator: figures → the tables of docs/benchmarks.md ----------
// Used by run.ts after the suites ran. Each suite owns one block between
// `<!-- bench:<suite>:start -->` and `<!-- bench:<suite>:end -->`; everything
// outside the blocks (the hand-written intro) is left as it is.

export interface SuiteFigure extends Figure {
  readonly bench: string;
}

/** Where the figures were measured. */
export interface Machine {
  readonly cores: number;
  readonly model: string;
  readonly memoryBytes: number;
  readonly node: string;
}

/** The JSON figure lines of `suite` in a suite's stdout; any other line is ignored. */
export function parseFigures(stdout: string, suite: string): SuiteFigure[] {
  const figures: SuiteFigure[] = [];
  for (const line of stdout.split('\n')) {
    if (!line.startsWith('{')) continue;
    let value: unknown;
    try {
      value = JSON.parse(line);
    } catch {
      continue;
    }
    const f = value as Partial<SuiteFigure>;
    if (
      f.bench === suite &&
      typeof f.metric === 'string' &&
      typeof f.value === 'number' &&
      Number.isFinite(f.value) &&
      typeof f.unit === 'string'
    ) {
      figures.push({ bench: f.bench, metric: f.metric, value: f.value, unit: f.unit });
    }
  }
  return figures;
}

/** Cores, CPU model (first `model name` of /proc/cpuinfo), total memory and Node version. */
export function describeMachine(cpuinfo: string, cores: number, memoryBytes: number, node: string): Machine {
  const model = /^model name\s*:\s*(.+)$/m.exec(cpuinfo)?.[1]?.trim() ?? 'unknown CPU';
  return { cores, model, memoryBytes, node };
}

const cell = (text: string): string => text.replaceAll('|', '\\|');

function formatValue(value: number): string {
  if (Number.isInteger(value)) return value.toLocaleString('en-US');
  return String(Number(value.toPrecision(4)));
}

/** The marked block of one suite: a machine line and a table of metric, value, unit, command. */
export function renderSuite(suite: string, figures: readonly Figure[], machine: Machine, date: string): string {
  const command = `npm run bench -- ${suite}`;
  const memoryGiB = (machine.memoryBytes / 1024 ** 3).toFixed(1);
  const lines = [
    `<!-- bench:${suite}:start -->`,
    `### ${suite}`,
    '',
    `Measured ${date} on ${machine.cores} × ${cell(machine.model)}, ${memoryGiB} GiB memory, Node ${machine.node}.`,
    '',
    '| metric | value | unit | reproduce |',
    '| --- | ---: | --- | --- |',
    ...figures.map((f) => `| ${cell(f.metric)} | ${formatValue(f.value)} | ${cell(f.unit)} | \`${command}\` |`),
    ...(figures.length === 0 ? ['| (no figures: the suite failed or printed none) | | | |'] : []),
    `<!-- bench:${suite}:end -->`,
  ];
  return lines.join('\n');
}

/** Replaces the block of `suite` in `doc`, or appends one; other blocks and text stay byte for byte. */
export function replaceSuiteBlock(doc: string, suite: string, block: string): string {
  const start = `<!-- bench:${suite}:start -->`;
  const end = `<!-- bench:${suite}:end -->`;
  const from = doc.indexOf(start);
  const to = doc.indexOf(end, from);
  if (from >= 0 && to > from) return doc.slice(0, from) + block + doc.slice(to + end.length);
  return `${doc.replace(/\n*$/, '')}\n\n${block}\n`;
}
