// `helm test <release>`: the scheduler and gateway charts each render a test
// pod (templates/tests/check.yaml) running `switchyard check` from the
// release's own image. The tests render it with the real helm binary, check
// it is a pod like the release's own (image, security, pull secrets) that
// no selector of the release takes for one of its pods, and that its command
// names the release's Services; then run exactly that command line, its
// hosts replaced by a local cluster's, and see it pass, and fail on a dead
// address. The runtime chart has none: a runtime has no Service, and its
// readiness (/readyz: the tunnel is up) already says what a test would.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Pod } from 'kubernetes-models/v1';
import { startCluster, type TestCluster } from '../support/cluster.ts';
import { compileCacheEnv } from '../support/processes.ts';
import { chartRenderer, root, type Manifest } from './helm.ts';

const { skip, render: renderManifests, notes } = chartRenderer('helm test hook tests');

type Container = {
  image: string;
  args: string[];
  env?: { name: string; value: string }[];
  securityContext: unknown;
  resources: unknown;
  volumeMounts: { name: string; mountPath: string }[];
};
type PodSpec = {
  securityContext: unknown;
  imagePullSecrets?: unknown;
  restartPolicy?: string;
  containers: Container[];
  volumes: { name: string; secret?: { secretName: string }; configMap?: { name: string } }[];
};
type Meta = { name: string; labels?: Record<string, string>; annotations?: Record<string, string> };

const meta = (m: Manifest): Meta => m.metadata as Meta;
const isTest = (m: Manifest): boolean => meta(m).annotations?.['helm.sh/hook'] === 'test';

/** The chart's test pods and the rest of what it renders. */
async function render(chart: string, set: readonly string[] = []): Promise<{ tests: Manifest[]; rest: Manifest[] }> {
  const manifests = await renderManifests(chart, undefined, set);
  return { tests: manifests.filter(isTest), rest: manifests.filter((m) => !isTest(m)) };
}

/** The one test pod of a render, validated as a Kubernetes Pod. */
function testPod(tests: Manifest[]): { meta: Meta; spec: PodSpec; container: Container } {
  assert.equal(tests.length, 1, 'one test hook');
  const [pod] = tests;
  assert.equal(pod!.kind, 'Pod');
  new Pod(pod as never).validate();
  const spec = pod!.spec as PodSpec;
  assert.equal(spec.containers.length, 1);
  return { meta: meta(pod!), spec, container: spec.containers[0]! };
}

const workloadPod = (rest: Manifest[], kind: string): PodSpec =>
  (rest.find((m) => m.kind === kind)!.spec as { template: { spec: PodSpec } }).template.spec;

/** Every label selector of the release: the pods it selects are its own (Services, budgets, policies, workloads). */
function selectors(rest: Manifest[]): Record<string, string>[] {
  return rest.flatMap((m) => {
    const spec = m.spec as {
      selector?: Record<string, string> & { matchLabels?: Record<string, string> };
      podSelector?: { matchLabels?: Record<string, string> };
    };
    // A Service's selector is the labels themselves; the others' are under matchLabels.
    const selector = m.kind === 'Service' ? spec?.selector : spec?.selector?.matchLabels;
    return [spec?.podSelector?.matchLabels, selector].filter((s): s is Record<string, string> => s !== undefined);
  });
}

/** What every test pod must share with the release's own pods, and what it must not. */
function assertLikeTheRelease(pod: ReturnType<typeof testPod>, rest: Manifest[], workloadKind: string): void {
  assert.equal(pod.meta.annotations?.['helm.sh/hook'], 'test');
  const policy = (pod.meta.annotations?.['helm.sh/hook-delete-policy'] ?? '').split(',');
  assert.ok(policy.includes('hook-succeeded'), 'a pod that passed is deleted');
  assert.ok(policy.includes('before-hook-creation'), 'a failed one is replaced by the next run');
  assert.equal(pod.spec.restartPolicy, 'Never');
  const own = workloadPod(rest, workloadKind);
  assert.equal(pod.container.image, own.containers[0]!.image);
  assert.deepEqual(pod.spec.securityContext, own.securityContext);
  assert.deepEqual(pod.container.securityContext, own.containers[0]!.securityContext);
  assert.deepEqual(pod.spec.imagePullSecrets, own.imagePullSecrets);
  assert.ok(pod.container.resources, 'resources are set');
  assert.equal(pod.container.args[0], 'apps/cli/src/main.ts', 'the image runs node with the CLI');
  assert.equal(pod.meta.labels?.['app.kubernetes.io/part-of'], 'switchyard', 'a NetworkPolicy admits it');
  for (const selector of selectors(rest)) {
    const matches = Object.entries(selector).every(([k, v]) => pod.meta.labels?.[k] === v);
    assert.ok(!matches, `the test pod is not selected by ${JSON.stringify(selector)}`);
  }
}

/** The values of `flag` in `args`, in order. */
const flagValues = (args: readonly string[], flag: string): string[] =>
  args.flatMap((arg, i) => (arg === flag ? [args[i + 1]!] : []));

/** The Service named `name` and its one port. */
function servicePort(rest: Manifest[], name: string): number {
  const service = rest.find((m) => m.kind === 'Service' && m.metadata.name === name);
  assert.ok(service, `Service ${name}`);
  return (service.spec as { ports: { port: number }[] }).ports[0]!.port;
}

/** The NODE_EXTRA_CA_CERTS file, and that it is in a mount of the trustedCA ConfigMap. */
function assertTrusts(pod: ReturnType<typeof testPod>, configMap: string): void {
  const file = pod.container.env?.find((e) => e.name === 'NODE_EXTRA_CA_CERTS')?.value;
  assert.ok(file);
  const mount = pod.container.volumeMounts.find((v) => file.startsWith(`${v.mountPath}/`));
  assert.equal(pod.spec.volumes.find((v) => v.name === mount?.name)?.configMap?.name, configMap);
}

const PULL = ['imagePullSecrets[0].name=regcred', 'image.tag=1.2.3'];
const API_TOKEN = 'api-token-0123456789abcdef';

describe('charts/scheduler: helm test hook', { skip }, () => {
  it('asks the Service and every replica by its peer name, as the release serves them', async () => {
    const { tests, rest } = await render('scheduler', [...PULL, 'replicas=4', 'service.port=7443']);
    const pod = testPod(tests);
    assertLikeTheRelease(pod, rest, 'StatefulSet');
    assert.equal(pod.container.image, 'switchyard:1.2.3');
    const args = pod.container.args;
    assert.deepEqual(args.slice(1, 3), ['check', 'scheduler']);
    assert.deepEqual(flagValues(args, '--scheduler'), [
      `http://sy-scheduler.switchyard.svc:${servicePort(rest, 'sy-scheduler')}`,
    ]);
    const peerPort = servicePort(rest, 'sy-scheduler-peers');
    assert.deepEqual(
      flagValues(args, '--replica'),
      [0, 1, 2, 3].map((i) => `http://sy-scheduler-${i}.sy-scheduler-peers.switchyard.svc:${peerPort}`),
    );
    assert.deepEqual(flagValues(args, '--token-file'), [], 'no API token without apiTokens');
  });

  it('presents an API token from the apiTokens Secret, and speaks https trusting trustedCA with tls', async () => {
    const set = [
      `apiTokens.values[0]=${API_TOKEN}`,
      'tls.existingSecret=scheduler-tls',
      'trustedCA.existingConfigMap=ca',
    ];
    const { tests, rest } = await render('scheduler', set);
    const pod = testPod(tests);
    const args = pod.container.args;
    assert.match(flagValues(args, '--scheduler')[0]!, /^https:\/\/sy-scheduler\.switchyard\.svc:7070$/);
    for (const replica of flagValues(args, '--replica')) assert.match(replica, /^https:\/\//);
    const [file] = flagValues(args, '--token-file');
    const mount = pod.container.volumeMounts.find((v) => file!.startsWith(`${v.mountPath}/`));
    const volume = pod.spec.volumes.find((v) => v.name === mount?.name);
    const secret = rest.find((m) => m.kind === 'Secret' && m.metadata.name === volume?.secret?.secretName);
    assert.ok(secret, 'the token file is a key of the apiTokens Secret');
    assert.ok(Object.hasOwn(secret.stringData as object, file!.slice(mount!.mountPath.length + 1)));
    assertTrusts(pod, 'ca');
    // An existing Secret is mounted by its own name.
    const existing = testPod((await render('scheduler', ['apiTokens.existingSecret=ops-tokens'])).tests);
    assert.ok(existing.spec.volumes.some((v) => v.secret?.secretName === 'ops-tokens'));
  });

  it('renders no test pod with tests.enabled=false', async () => {
    assert.deepEqual((await render('scheduler', ['tests.enabled=false'])).tests, []);
  });
});

describe('charts/gateway: helm test hook', { skip }, () => {
  it('sends /mcp of the Service an initialize, expecting 200 without client auth', async () => {
    const { tests, rest } = await render('gateway', [...PULL, 'service.port=8088']);
    const pod = testPod(tests);
    assertLikeTheRelease(pod, rest, 'Deployment');
    assert.deepEqual(pod.container.args.slice(1), [
      'check',
      'gateway',
      '--gateway',
      `http://sy-gateway.switchyard.svc:${servicePort(rest, 'sy-gateway')}/mcp`,
    ]);
  });

  it('expects a challenge with auth bearer or jwt, and speaks https trusting trustedCA with tls', async () => {
    const bearer = testPod((await render('gateway', ['auth.mode=bearer', 'auth.existingSecret=clients'])).tests);
    assert.deepEqual(flagValues(bearer.container.args, '--gateway'), ['http://sy-gateway.switchyard.svc:80/mcp']);
    assert.ok(bearer.container.args.includes('--auth-required'));
    const jwt = testPod((await render('gateway', ['auth.mode=jwt', 'auth.jwksUrl=https://idp.example/jwks'])).tests);
    assert.ok(jwt.container.args.includes('--auth-required'));
    const tls = testPod(
      (await render('gateway', ['tls.existingSecret=gw-tls', 'trustedCA.existingConfigMap=ca'])).tests,
    );
    assert.deepEqual(flagValues(tls.container.args, '--gateway'), ['https://sy-gateway.switchyard.svc:80/mcp']);
    assert.ok(!tls.container.args.includes('--auth-required'));
    assertTrusts(tls, 'ca');
  });

  it('renders no test pod with tests.enabled=false', async () => {
    assert.deepEqual((await render('gateway', ['tests.enabled=false'])).tests, []);
  });
});

describe('NOTES.txt: helm test', { skip }, () => {
  it('names helm test and what it checks, unless tests are off', async () => {
    assert.match(await notes('scheduler'), /^Check it: helm test sy --logs {3}\(the replicas answer and agree/m);
    assert.doesNotMatch(await notes('scheduler', ['tests.enabled=false']), /helm test/);
    assert.match(
      await notes('gateway'),
      /^Check it: helm test sy --logs .*initialize; that takes a runtime of class demo\)$/m,
    );
    const bearer = await notes('gateway', ['auth.mode=bearer', 'auth.existingSecret=clients']);
    assert.match(bearer, /initialize with a 401 challenge; it holds no client credentials\)$/m);
    assert.doesNotMatch(await notes('gateway', ['tests.enabled=false']), /helm test/);
    assert.match(await notes('runtime'), /this chart has no `helm test`/);
  });
});

describe('charts/runtime: helm test hook', { skip }, () => {
  it('has none: a runtime has no Service, and its readiness is its tunnel', async () => {
    assert.deepEqual((await render('runtime')).tests, []);
  });
});

/** The rendered arguments with each URL's origin in `origins` replaced, and each path in `files`. */
function localized(args: readonly string[], origins: Map<string, string>, files = new Map<string, string>()): string[] {
  return args.map((arg) => {
    if (files.has(arg)) return files.get(arg)!;
    if (!URL.canParse(arg)) return arg;
    const url = new URL(arg);
    const local = origins.get(url.origin);
    return local === undefined ? arg : `${local}${url.pathname === '/' ? '' : url.pathname}`;
  });
}

/** Runs the image's command line (node, then the pod's args) from the repository root, as the image's /app. */
function runPodCommand(args: readonly string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      args,
      { cwd: root, timeout: 60_000, env: { ...process.env, ...compileCacheEnv() } },
      (error, stdout, stderr) => resolve({ code: error ? Number(error.code ?? 1) : 0, stdout, stderr }),
    );
  });
}

const origin = (url: string): string => new URL(url).origin;
const DEAD = 'http://127.0.0.1:1';
/** What the command says of DEAD, and fails with: a dial refused, as nothing listens there. */
const DEAD_REFUSED =
  /^switchyard: cannot reach http:\/\/127\.0\.0\.1:1: connect ECONNREFUSED 127\.0\.0\.1:1 \(nothing listens there\)$/m;

/** The scheduler's rendered hosts, the Service (a replica here) and each replica by its peer name, to `urls`. */
const schedulerOrigins = (urls: readonly string[]): Map<string, string> =>
  new Map([
    ['http://sy-scheduler.switchyard.svc:7070', origin(urls[urls.length - 1]!)],
    ...urls.map((url, i) => [`http://sy-scheduler-${i}.sy-scheduler-peers.switchyard.svc:7070`, origin(url)] as const),
  ]);

describe('the rendered test commands against a local cluster', { skip }, () => {
  let cluster: TestCluster;
  let bearerGateway: string;
  before(async () => {
    cluster = await startCluster({ schedulers: 3, runtimes: 1, gateways: 1 });
    const gateway = await cluster.addGateway(undefined, {
      args: ['--auth.mode', 'bearer', '--auth.tokens', API_TOKEN],
    });
    bearerGateway = `http://127.0.0.1:${gateway.port}`;
  });
  after(async () => cluster?.stop());

  it('scheduler: passes once the replicas agree, and fails on a dead address saying so', async () => {
    const args = testPod((await render('scheduler')).tests).container.args;
    const passed = await runPodCommand(localized(args, schedulerOrigins(cluster.schedulerUrls())));
    assert.equal(passed.code, 0, passed.stderr);
    assert.match(
      passed.stdout,
      /^scheduler ok: leader s\d \(http:\/\/127\.0\.0\.1:\d+\), term \d+, epoch \d+, on 3 replicas/,
    );
    const dead = await runPodCommand(localized(args, schedulerOrigins([DEAD, DEAD, DEAD])));
    assert.equal(dead.code, 1, dead.stdout);
    assert.match(dead.stderr, DEAD_REFUSED);
  });

  it('gateway: passes on an initialize answered 200, and fails on a dead address saying so', async () => {
    const args = testPod((await render('gateway')).tests).container.args;
    const service = new Map([['http://sy-gateway.switchyard.svc', origin(cluster.gatewayUrl())]]);
    const passed = await runPodCommand(localized(args, service));
    assert.equal(passed.code, 0, passed.stderr);
    assert.match(passed.stdout, /^gateway ok: \/readyz 200, initialize 200 at http:\/\/127\.0\.0\.1:\d+\/mcp/);
    const dead = await runPodCommand(localized(args, new Map([['http://sy-gateway.switchyard.svc', DEAD]])));
    assert.equal(dead.code, 1, dead.stdout);
    assert.match(dead.stderr, DEAD_REFUSED);
  });

  it('gateway with client auth: passes on 401 with a Bearer challenge', async () => {
    const args = testPod((await render('gateway', ['auth.mode=bearer', 'auth.existingSecret=clients'])).tests).container
      .args;
    const passed = await runPodCommand(localized(args, new Map([['http://sy-gateway.switchyard.svc', bearerGateway]])));
    assert.equal(passed.code, 0, passed.stderr);
    assert.match(passed.stdout, /asks for credentials \(401, Bearer /);
    // Pointed at a gateway without auth, the same command fails: a 200 without credentials is the fault.
    const open = await runPodCommand(
      localized(args, new Map([['http://sy-gateway.switchyard.svc', origin(cluster.gatewayUrl())]])),
    );
    assert.equal(open.code, 1, open.stdout);
    assert.match(open.stderr, /answered initialize without credentials, though client auth is on/);
  });
});

describe('the rendered scheduler test command against replicas with API tokens', { skip }, () => {
  let cluster: TestCluster;
  let dir: string;
  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'switchyard-helm-test-'));
    cluster = await startCluster({
      schedulers: 3,
      runtimes: 0,
      gateways: 0,
      schedulerArgs: ['--api-tokens', API_TOKEN],
      apiToken: API_TOKEN,
    });
  });
  after(async () => {
    await cluster?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('presents the first token of the mounted Secret, and names a refused one', async () => {
    const args = testPod((await render('scheduler', [`apiTokens.values[0]=${API_TOKEN}`])).tests).container.args;
    const origins = schedulerOrigins(cluster.schedulerUrls());
    // As the chart's Secret holds them: one per line; the first is presented.
    const tokens = join(dir, 'tokens');
    writeFileSync(tokens, `${API_TOKEN}\nanother-token-0123456789\n`);
    const passed = await runPodCommand(localized(args, origins, new Map([['/etc/switchyard/api/tokens', tokens]])));
    assert.equal(passed.code, 0, passed.stderr);
    assert.match(passed.stdout, /^scheduler ok: /);
    const wrong = join(dir, 'wrong');
    writeFileSync(wrong, 'not-one-of-its-tokens-0123\n');
    const refused = await runPodCommand(localized(args, origins, new Map([['/etc/switchyard/api/tokens', wrong]])));
    assert.equal(refused.code, 1, refused.stdout);
    assert.match(refused.stderr, /refused the API token/);
  });
});
