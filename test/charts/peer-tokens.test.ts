// The scheduler replicas' peer tokens (epoch sync): a Secret of the operator's,
// or one the chart makes from values, mounted as the peer token file. Given
// neither, the replicas admit peers on join tokens, as before peer tokens
// existed, and the NOTES say so. The chart generates none: a random token
// would differ at every `helm template` (GitOps tools render so), and
// switching a running release over in one upgrade would split its replicas
// until the StatefulSet finished rolling.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFile, execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { parseAllDocuments } from 'yaml';

const root = join(import.meta.dirname, '../..');
const run = promisify(execFile);
// scripts/helm.ts prints the binary's path, or `skip: <reason>` when it cannot be had (bounded, as in charts.test.ts).
const located = execFileSync(process.execPath, [join(root, 'scripts/helm.ts')], {
  encoding: 'utf8',
  timeout: 120_000,
}).trim();
const skip: string | false = located.startsWith('skip: ') ? located.slice(6) : false;
if (skip) console.log(`chart peer token tests skipped: ${skip}`);

type Manifest = { kind: string; metadata: { name: string }; [k: string]: unknown };
type Pod = {
  containers: {
    env?: { name: string; value?: string }[];
    volumeMounts?: { name: string; mountPath: string; readOnly?: boolean }[];
  }[];
  volumes?: { name: string; secret?: { secretName: string } }[];
};

const SECRET = 'sy-scheduler-peer';

async function render(set: readonly string[] = []): Promise<Manifest[]> {
  const args = ['template', 'sy', 'charts/scheduler', '--namespace', 'switchyard'];
  for (const s of set) args.push('--set', s);
  const { stdout } = await run(located, args, { cwd: root, maxBuffer: 16 << 20 });
  return parseAllDocuments(stdout)
    .map((d) => d.toJSON() as Manifest | null)
    .filter((m): m is Manifest => m !== null);
}

const podOf = (manifests: Manifest[]): Pod =>
  (manifests.find((m) => m.kind === 'StatefulSet')!.spec as { template: { spec: Pod } }).template.spec;
const secretOf = (manifests: Manifest[]): Manifest | undefined =>
  manifests.find((m) => m.kind === 'Secret' && m.metadata.name === SECRET);

describe('charts/scheduler: peer tokens', { skip }, () => {
  it('given none, makes no Secret and mounts none (join tokens admit peers)', async () => {
    const manifests = await render();
    assert.equal(secretOf(manifests), undefined);
    const pod = podOf(manifests);
    assert.equal(
      pod.containers[0]!.env!.find((e) => e.name === 'SWITCHYARD_PEER_TOKEN_FILE'),
      undefined,
    );
    assert.equal(
      pod.containers[0]!.volumeMounts!.find((v) => v.name === 'peer-tokens'),
      undefined,
    );
    assert.equal(
      pod.volumes!.find((v) => v.name === 'peer-tokens'),
      undefined,
    );
  });

  it('mounts the Secret it makes from values as the peer token file', async () => {
    const manifests = await render(['peerTokens.values={peer-token-0123456789abcdef}']);
    const pod = podOf(manifests);
    const env = pod.containers[0]!.env!.find((e) => e.name === 'SWITCHYARD_PEER_TOKEN_FILE');
    assert.equal(env?.value, '/etc/switchyard/peer/tokens');
    assert.deepEqual(
      pod.containers[0]!.volumeMounts!.find((v) => v.name === 'peer-tokens'),
      { name: 'peer-tokens', mountPath: '/etc/switchyard/peer', readOnly: true },
    );
    assert.equal(pod.volumes!.find((v) => v.name === 'peer-tokens')?.secret?.secretName, SECRET);
  });

  it('makes the Secret from values when given some, under the key named', async () => {
    const token = 'peer-token-0123456789abcdef';
    const manifests = await render([`peerTokens.values={${token}}`, 'peerTokens.key=peers']);
    assert.deepEqual(secretOf(manifests)!.stringData, { peers: `${token}\n` });
    assert.equal(secretOf(manifests)!.data, undefined);
    const env = podOf(manifests).containers[0]!.env!.find((e) => e.name === 'SWITCHYARD_PEER_TOKEN_FILE');
    assert.equal(env?.value, '/etc/switchyard/peer/peers');
  });

  it('mounts an existing Secret instead, and makes none', async () => {
    const manifests = await render(['peerTokens.existingSecret=switchyard-peer']);
    assert.equal(secretOf(manifests), undefined);
    const pod = podOf(manifests);
    assert.equal(pod.volumes!.find((v) => v.name === 'peer-tokens')?.secret?.secretName, 'switchyard-peer');
  });

  it('refuses a token too short to be one', async () => {
    await assert.rejects(render(['peerTokens.values={short}']), /peerTokens\.values\.0/);
  });
});
