// The helm binary the chart tests run, as scripts/helm.ts unpacks it from an
// npm package (no download from elsewhere), the rendering through it that
// they share (manifests and NOTES.txt), and the checkout's root and a
// promise-returning execFile for the suites that run helm (or an app)
// themselves.
import { execFile, execFileSync } from 'node:child_process';
import { cpSync, existsSync, mkdtempSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { parse, parseAllDocuments } from 'yaml';

/** The checkout's root: the directory of charts/, apps/ and scripts/. */
export const root = join(import.meta.dirname, '../..');
/** execFile as a promise of `{ stdout, stderr }`, rejecting on a non-zero exit: helm, or an app. */
export const run = promisify(execFile);

/**
 * The binary's path, or `skip`: why there is none, printed once as `<tests>
 * skipped: <reason>` for a test runner's `skip` option. Bounded: unpacking
 * takes seconds, and a synchronous call that hung would stall the test file
 * past every timeout.
 */
export function locateHelm(tests: string): { helm: string; skip: string | false } {
  const located = execFileSync(process.execPath, [join(root, 'scripts/helm.ts')], {
    encoding: 'utf8',
    timeout: 120_000,
  }).trim();
  const skip: string | false = located.startsWith('skip: ') ? located.slice(6) : false;
  if (skip) console.log(`${tests} skipped: ${skip}`);
  return { helm: skip ? 'helm' : located, skip };
}

/** Where a chart is rendered: its release name and namespace (sy and switchyard unless given). */
export type ReleaseAt = { release?: string; namespace?: string };

export type Manifest = { kind: string; apiVersion: string; metadata: { name: string }; [k: string]: unknown };

/** What chartRenderer gives a test file. */
export interface ChartRenderer {
  /** Why the file's tests are skipped (no helm binary, printed once), or false: a `skip` option. */
  readonly skip: string | false;
  /** helm's stdout for `args`, run in the checkout's root; a refusal rejects. */
  helmRun(args: string[]): Promise<string>;
  /**
   * `helm template sy charts/<chart> --namespace switchyard`, with a values file and `--set` values, as parsed
   * manifests; `at` renders another release name or namespace.
   */
  render(chart: string, valuesFile?: string, set?: readonly string[], at?: ReleaseAt): Promise<Manifest[]>;
  /**
   * NOTES.txt of `charts/<chart>` as `helm install` of release sy in namespace switchyard prints it, with `--set`
   * values. `helm template` leaves NOTES.txt out and `helm install --dry-run` needs a cluster, so this renders a
   * copy of the chart holding NOTES.txt as a file and a template printing it through `tpl` (same values, same
   * helpers) as one YAML string. The copies live in a temporary directory removed as the process exits.
   */
  notes(chart: string, set?: readonly string[]): Promise<string>;
}

/**
 * The real helm binary for one test file (`tests` names its tests in the skip
 * message, see locateHelm), each distinct command run once per renderer. Not
 * shared between files: each test file runs in its own process, and renders
 * again what another file rendered.
 */
export function chartRenderer(tests: string): ChartRenderer {
  const { helm: helmPath, skip } = locateHelm(tests);

  // helm's output depends only on its arguments and the files in this checkout, which no test changes: each
  // command runs once, and the tests that render the same values share its output (parsed afresh by each).
  const helmRuns = new Map<string, Promise<string>>();
  function helmRun(args: string[]): Promise<string> {
    const key = args.join('\0');
    let output = helmRuns.get(key);
    if (!output) {
      output = run(helmPath, args, { cwd: root, maxBuffer: 16 << 20 }).then(({ stdout }) => stdout);
      helmRuns.set(key, output);
    }
    return output;
  }

  async function render(
    chart: string,
    valuesFile?: string,
    set: readonly string[] = [],
    { release = 'sy', namespace = 'switchyard' }: ReleaseAt = {},
  ): Promise<Manifest[]> {
    const args = ['template', release, `charts/${chart}`, '--namespace', namespace];
    if (valuesFile) args.push('-f', valuesFile);
    for (const s of set) args.push('--set', s);
    return parseAllDocuments(await helmRun(args))
      .map((d) => d.toJSON() as Manifest | null)
      .filter((m): m is Manifest => m !== null);
  }

  // Each chart is copied once, at its first notes, for every later suite of the file: the directory goes as the
  // process (one test file) exits.
  let notesDir: string | undefined;
  function notesChart(chart: string): string {
    if (!notesDir) {
      const dir = mkdtempSync(join(tmpdir(), 'switchyard-notes-'));
      process.once('exit', () => rmSync(dir, { recursive: true, force: true }));
      notesDir = dir;
    }
    const copy = join(notesDir, chart);
    if (!existsSync(copy)) {
      cpSync(join(root, 'charts', chart), copy, { recursive: true });
      renameSync(join(copy, 'templates/NOTES.txt'), join(copy, 'NOTES.txt'));
      writeFileSync(join(copy, 'templates/notes.yaml'), 'notes: {{ tpl (.Files.Get "NOTES.txt") . | toJson }}\n');
    }
    return copy;
  }

  async function notes(chart: string, set: readonly string[] = []): Promise<string> {
    const args = ['template', 'sy', notesChart(chart), '--namespace', 'switchyard'];
    args.push('--show-only', 'templates/notes.yaml');
    for (const s of set) args.push('--set', s);
    return (parse(await helmRun(args)) as { notes: string }).notes;
  }

  return { skip, helmRun, render, notes };
}
