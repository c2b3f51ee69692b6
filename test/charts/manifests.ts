// What the chart tests read in the manifests helm renders (see helm.ts): the
// workload's pod, the Secret file behind an env var, and whether the env
// names a chart sets are ones its app reads. Validation against the
// Kubernetes API schemas is in models.ts.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import type { Manifest } from './helm.ts';

const root = join(import.meta.dirname, '../..');

const envNames = new Map<string, Set<string>>();
/** The SWITCHYARD_* names `app` reads, from its `--help` (which lists each setting's env name); asked once per app. */
function envNamesOf(app: string): Set<string> {
  let names = envNames.get(app);
  if (!names) {
    const help = execFileSync(process.execPath, [join(root, `apps/${app}/src/main.ts`), '--help'], {
      encoding: 'utf8',
    });
    names = new Set(help.match(/(?<=env: )SWITCHYARD_[A-Z0-9_]+/g) ?? []);
    envNames.set(app, names);
  }
  return names;
}

/** Environment the charts may set besides the apps' own SWITCHYARD_* names. */
const NODE_ENV_NAMES = new Set(['POD_IP', 'NODE_OPTIONS', 'GLIBC_TUNABLES', 'NODE_EXTRA_CA_CERTS', 'HOME']);

/**
 * Asserts that `container` sets only env names its app reads (as its `--help`
 * lists them) or NODE_ENV_NAMES. The app's `--help` runs once per app and
 * process, taking this process's environment.
 */
export function assertEnvNamesRead(app: string, container: { env?: { name: string }[] }): void {
  const read = envNamesOf(app);
  assert.ok(read.size > 5, `${app} --help lists its env names`);
  for (const e of container.env ?? []) assert.ok(NODE_ENV_NAMES.has(e.name) || read.has(e.name), e.name);
}

/** The parts of a workload's pod the chart tests read; tests cast to what else they read. */
export type PodSpec = {
  securityContext: Record<string, unknown>;
  containers: {
    livenessProbe?: { httpGet: { path: string } };
    readinessProbe?: { httpGet: { path: string } };
    securityContext: { readOnlyRootFilesystem: boolean; runAsNonRoot: boolean; capabilities: { drop: string[] } };
    env?: { name: string }[];
  }[];
};
export const podOf = (m: Manifest): PodSpec => (m.spec as { template: { spec: PodSpec } }).template.spec;

/** A pod as secretFileOf reads it: env, mounts and Secret volumes. */
export type SecretPod = {
  containers: {
    env?: { name: string; value?: string; valueFrom?: { secretKeyRef?: unknown } }[];
    volumeMounts?: { name: string; mountPath: string; readOnly?: boolean }[];
  }[];
  volumes?: { name: string; secret?: { secretName: string; items?: { key: string; path: string }[] } }[];
};

/**
 * The Secret key behind the file an env var names (the volume mounted at
 * its folder), and whether it is mounted read-only; undefined without the
 * variable.
 */
export function secretFileOf(
  pod: SecretPod,
  env: string,
): { secret: string; key: string; readOnly: boolean } | undefined {
  const container = pod.containers[0]!;
  const path = container.env?.find((e) => e.name === env)?.value;
  if (path === undefined) return undefined;
  const slash = path.lastIndexOf('/');
  const mount = container.volumeMounts?.find((m) => m.mountPath === path.slice(0, slash));
  const volume = pod.volumes?.find((v) => v.name === mount?.name);
  const item = volume?.secret?.items?.find((i) => i.path === path.slice(slash + 1));
  assert.ok(mount && volume?.secret && item, `${env}=${path} is a key of a mounted Secret`);
  return { secret: volume.secret.secretName, key: item.key, readOnly: mount.readOnly === true };
}
