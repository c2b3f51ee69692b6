// The scheduler replicas' peer tokens (epoch sync): a Secret of the operator's,
// one the chart makes from values, or, given neither, one the chart makes
// with a random token, so that no two installs, and no runtime's join token,
// admit each other's peers. An upgrade keeps that token: the chart looks the
// Secret up (helm `lookup`), which `helm template` does not do; the tests of
// that run `helm template --dry-run=server` against a stand-in for the
// Kubernetes API on loopback, answering the two calls the lookup makes.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFile, execFileSync } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
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
const GENERATED = /^[A-Za-z0-9]{32}\n$/;

async function render(set: readonly string[] = [], env: NodeJS.ProcessEnv = {}, server = false): Promise<Manifest[]> {
  const args = ['template', 'sy', 'charts/scheduler', '--namespace', 'switchyard'];
  if (server) args.push('--dry-run=server');
  for (const s of set) args.push('--set', s);
  const { stdout } = await run(located, args, { cwd: root, env: { ...process.env, ...env }, maxBuffer: 16 << 20 });
  return parseAllDocuments(stdout)
    .map((d) => d.toJSON() as Manifest | null)
    .filter((m): m is Manifest => m !== null);
}

const podOf = (manifests: Manifest[]): Pod =>
  (manifests.find((m) => m.kind === 'StatefulSet')!.spec as { template: { spec: Pod } }).template.spec;
const secretOf = (manifests: Manifest[]): Manifest | undefined =>
  manifests.find((m) => m.kind === 'Secret' && m.metadata.name === SECRET);
/** The generated token of the chart's Secret, decoded. */
const generatedToken = (manifests: Manifest[]): string => {
  const data = secretOf(manifests)?.data as Record<string, string> | undefined;
  return Buffer.from(data?.tokens ?? '', 'base64').toString();
};

describe('charts/scheduler: peer tokens', { skip }, () => {
  it('given none, generates a token into a Secret of its own, a new one per install, mounted as the peer token file', async () => {
    const [first, second] = await Promise.all([render(), render(['logLevel=info'])]);
    const token = generatedToken(first);
    assert.match(token, GENERATED);
    assert.notEqual(generatedToken(second), token, 'another install, another token');
    assert.equal(secretOf(first)!.stringData, undefined);
    const pod = podOf(first);
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

describe('charts/scheduler: the generated peer token across upgrades', { skip }, () => {
  const KEPT = 'kept-peer-token-0123456789abcdef\n';
  let stored: Record<string, string> | undefined;
  const calls: string[] = [];
  let api: http.Server;
  let dir = '';
  let kubeconfig = '';

  before(async () => {
    // The calls `lookup` makes of a Secret: the core group's resources, then the Secret (404 when there is none).
    api = http.createServer((req, res) => {
      const path = (req.url ?? '/').split('?', 1)[0]!;
      calls.push(path);
      const answer = (status: number, body: unknown): void =>
        void res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
      if (path === '/api/v1') {
        const secrets = { name: 'secrets', singularName: 'secret', namespaced: true, kind: 'Secret', verbs: ['get'] };
        return answer(200, { kind: 'APIResourceList', groupVersion: 'v1', resources: [secrets] });
      }
      if (path === `/api/v1/namespaces/switchyard/secrets/${SECRET}` && stored) {
        return answer(200, { apiVersion: 'v1', kind: 'Secret', metadata: { name: SECRET }, data: stored });
      }
      answer(404, { kind: 'Status', apiVersion: 'v1', status: 'Failure', reason: 'NotFound', code: 404 });
    });
    api.listen(0, '127.0.0.1');
    await once(api, 'listening');
    dir = mkdtempSync(join(tmpdir(), 'switchyard-chart-lookup-'));
    kubeconfig = join(dir, 'kubeconfig');
    const server = `http://127.0.0.1:${(api.address() as AddressInfo).port}`;
    writeFileSync(
      kubeconfig,
      JSON.stringify({
        apiVersion: 'v1',
        kind: 'Config',
        clusters: [{ name: 'stand-in', cluster: { server } }],
        users: [{ name: 'helm', user: { token: 'stand-in' } }],
        contexts: [{ name: 'stand-in', context: { cluster: 'stand-in', user: 'helm', namespace: 'switchyard' } }],
        'current-context': 'stand-in',
      }),
    );
  });
  after(() => {
    api?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  const upgrade = (set: readonly string[] = []): Promise<Manifest[]> => render(set, { KUBECONFIG: kubeconfig }, true);

  it('keeps the token of the Secret an earlier install made', async () => {
    stored = { tokens: Buffer.from(KEPT).toString('base64') };
    assert.equal(generatedToken(await upgrade()), KEPT);
    assert.ok(calls.includes(`/api/v1/namespaces/switchyard/secrets/${SECRET}`), 'the Secret was looked up');
  });

  it('generates one when there is none, or it lacks the key', async () => {
    stored = undefined;
    assert.match(generatedToken(await upgrade()), GENERATED);
    stored = { other: Buffer.from(KEPT).toString('base64') };
    assert.match(generatedToken(await upgrade()), GENERATED);
  });
});
