// The helm binary the chart tests run, as scripts/helm.ts unpacks it from an
// npm package (no download from elsewhere).
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';

const root = join(import.meta.dirname, '../..');

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
