// `npm run bench -- <suite>` runs test/bench/<suite>/main.ts; with no suite,
// every suite in turn. Each suite is its own process so one suite's heap and
// JIT state cannot colour another's figures. Suites end by printing one JSON
// line per headline figure (see report.ts); they pass through to our stdout
// unchanged, and each suite that ran gets its table in docs/benchmarks.md
// regenerated (other suites' tables are left alone). `--no-docs` skips that.
import { spawn } from 'node:child_process';
import { existsSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { cpus, totalmem } from 'node:os';
import { join } from 'node:path';
import { format, resolveConfig } from 'prettier';
import { describeMachine, parseFigures, renderSuite, replaceSuiteBlock } from './report.ts';

const here = import.meta.dirname;
const DOC = join(here, '..', '..', 'docs', 'benchmarks.md');
/** A suite printing more than this on stdout is cut (the figures come last, so keep the tail). */
const STDOUT_BYTES_MAX = 1024 * 1024;

const available = readdirSync(here, { withFileTypes: true })
  .filter((d) => d.isDirectory() && existsSync(join(here, d.name, 'main.ts')))
  .map((d) => d.name)
  .sort();

const args = process.argv.slice(2);
const writeDocs = !args.includes('--no-docs');
const requested = args.filter((a) => a !== '--no-docs');
const unknown = requested.filter((s) => !available.includes(s));
if (unknown.length > 0) {
  console.error(`unknown bench suite: ${unknown.join(', ')}; available: ${available.join(', ') || '(none)'}`);
  process.exit(2);
}

/** Runs one suite; stderr passes through, stdout is echoed and kept (bounded) for its figures. */
function runSuite(suite: string): Promise<{ status: number | null; stdout: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, ['--expose-gc', join(here, suite, 'main.ts')], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    let stdout = '';
    child.stdout.on('data', (chunk: Buffer) => {
      process.stdout.write(chunk);
      stdout += chunk.toString('utf8');
      if (stdout.length > STDOUT_BYTES_MAX) stdout = stdout.slice(-STDOUT_BYTES_MAX);
    });
    child.once('close', (status) => resolve({ status, stdout }));
  });
}

const machine = describeMachine(
  existsSync('/proc/cpuinfo') ? readFileSync('/proc/cpuinfo', 'utf8') : '',
  cpus().length,
  totalmem(),
  process.version,
);
const date = new Date().toISOString().slice(0, 10);
let failed = 0;
for (const suite of requested.length > 0 ? requested : available) {
  console.error(`\n=== bench ${suite}`);
  const { status, stdout } = await runSuite(suite);
  if (status !== 0) {
    failed++;
    console.error(`bench ${suite} failed (exit ${status})`);
  }
  const figures = parseFigures(stdout, suite);
  // A failed suite keeps its previous table: a partial run must not erase recorded figures.
  if (writeDocs && status === 0) {
    const doc = replaceSuiteBlock(readFileSync(DOC, 'utf8'), suite, renderSuite(suite, figures, machine, date));
    // Formatted as the repository's Prettier check expects, so a regenerated file passes `npm run lint`.
    writeFileSync(DOC, await format(doc, { ...(await resolveConfig(DOC)), filepath: DOC }));
    console.error(`docs/benchmarks.md: ${suite} table updated (${figures.length} figures)`);
  }
}
process.exit(failed > 0 ? 1 : 0);
