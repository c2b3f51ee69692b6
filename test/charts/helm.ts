// The helm binary the chart tests run, as scripts/helm.ts unpacks it from an
// npm package (no download from elsewhere).
import { execFile, execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { parseAllDocuments } from 'yaml';

const root = join(import.meta.dirname, '../..');
const run = promisify(execFile);

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

export type Manifest = { kind: string; apiVersion: string; metadata: { name: string }; [k: string]: unknown };

/** `helm template` of `charts/<chart>` with `--set` values, as parsed manifests; helm's refusal rejects. */
export async function renderChart(helm: string, chart: string, set: readonly string[] = []): Promise<Manifest[]> {
  const args = ['template', 'sy', `charts/${chart}`, '--namespace', 'switchyard', ...set.flatMap((s) => ['--set', s])];
  const { stdout } = await run(helm, args, { cwd: root, maxBuffer: 16 << 20 });
  return parseAllDocuments(stdout)
    .map((d) => d.toJSON() as Manifest | null)
    .filter((m): m is Manifest => m !== null);
}
