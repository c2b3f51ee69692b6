// Renders every chart with the real helm binary and validates each manifest
// against the Kubernetes API schemas (kubernetes-models), plus the security
// and probe contracts operators rely on.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { parse, parseAllDocuments } from 'yaml';
import { Deployment, StatefulSet } from 'kubernetes-models/apps/v1';
import { PodDisruptionBudget } from 'kubernetes-models/policy/v1';
import { HorizontalPodAutoscaler } from 'kubernetes-models/autoscaling/v2';
import { Ingress } from 'kubernetes-models/networking.k8s.io/v1';
import { ServiceMonitor } from '@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1';
import { CONNECT_PATH } from '@switchyard/tunnel';
import { compileCacheEnv } from '../support/processes.ts';
import { chartRenderer, type Manifest } from './helm.ts';
import { assertEnvNamesRead, podOf, secretFileOf, type PodSpec, type SecretPod } from './manifests.ts';
import { assertValidObjects } from './models.ts';

const root = join(import.meta.dirname, '../..');
// The apps these tests start (--help, --print-config: a dozen or so) take this process's environment:
// through Node's compile cache, all but the first load without the type stripper.
for (const [name, value] of Object.entries(compileCacheEnv())) process.env[name] ??= value;
const run = promisify(execFile);
const { skip, render, helmRun } = chartRenderer('chart tests');

const CHARTS = [
  {
    chart: 'scheduler',
    workload: 'StatefulSet',
    probes: true,
    expect: ['Role', 'RoleBinding', 'ServiceAccount', 'PodDisruptionBudget'],
  },
  {
    chart: 'gateway',
    workload: 'Deployment',
    probes: true,
    expect: ['Service', 'HorizontalPodAutoscaler', 'PodDisruptionBudget'],
  },
  { chart: 'runtime', workload: 'Deployment', probes: true, expect: ['ConfigMap'] },
];

for (const c of CHARTS) {
  describe(`charts/${c.chart}`, { skip }, () => {
    it('passes helm lint --strict with default and production values', async () => {
      await helmRun(['lint', '--strict', `charts/${c.chart}`]);
      await helmRun(['lint', '--strict', `charts/${c.chart}`, '-f', `test/charts/values-production-${c.chart}.yaml`]);
    });

    it('fails lint on a values file the schema refuses', async () => {
      await assert.rejects(
        helmRun(['lint', '--strict', `charts/${c.chart}`, '-f', 'test/charts/values-invalid.yaml']),
        (error: { stdout?: string }) => /Additional property replicaCount is not allowed/.test(error.stdout ?? ''),
      );
    });

    // Kubernetes drops an unknown field of a resources or env entry with at most a warning: a misspelt memory
    // limit leaves the pod without one, a misspelt value leaves the variable empty.
    it('refuses a misspelt key of resources or of an extraEnv entry, and an env value that is not a string', async () => {
      const refused = [
        [['resources.limit.memory=1Gi'], /resources: Additional property limit is not allowed/],
        [
          ['extraEnv[0].name=SWITCHYARD_LOG_LEVEL', 'extraEnv[0].valu=debug'],
          /Additional property valu is not allowed/,
        ],
        [
          ['extraEnv[0].name=SWITCHYARD_DRAIN_DELAY_MS', 'extraEnv[0].value=9000'],
          /value: Invalid type. Expected: string/,
        ],
      ] as const;
      for (const [set, message] of refused) await assert.rejects(render(c.chart, undefined, set), message);
      const env = ['extraEnv[0].name=SWITCHYARD_LOG_LEVEL', 'extraEnv[0].value=debug'];
      const fromSecret = ['extraEnv[1].name=SWITCHYARD_X', 'extraEnv[1].valueFrom.secretKeyRef.name=s'];
      await render(c.chart, undefined, [
        'resources.limits.memory=1Gi',
        'resources.requests.cpu=1',
        ...env,
        ...fromSecret,
      ]);
    });

    for (const variant of ['default', 'production'] as const) {
      it(`renders ${variant} values into valid Kubernetes objects with probes and a locked-down security context`, async () => {
        const file = variant === 'production' ? `test/charts/values-production-${c.chart}.yaml` : undefined;
        const manifests = await render(c.chart, file);
        assertValidObjects(manifests);
        const kinds = manifests.map((m) => m.kind);
        for (const kind of c.expect) assert.ok(kinds.includes(kind), `${kind} in ${kinds.join(',')}`);
        const workloads = manifests.filter((m) => ['Deployment', 'StatefulSet', 'DaemonSet'].includes(m.kind));
        assert.equal(workloads.length, 1);
        const pod = podOf(workloads[0]!);
        assert.equal(pod.securityContext.runAsNonRoot, true);
        assert.deepEqual(pod.securityContext.seccompProfile, { type: 'RuntimeDefault' });
        for (const container of pod.containers) {
          assert.equal(container.securityContext.readOnlyRootFilesystem, true);
          assert.equal(container.securityContext.runAsNonRoot, true);
          assert.deepEqual(container.securityContext.capabilities.drop, ['ALL']);
          if (c.probes) {
            assert.equal(container.livenessProbe?.httpGet.path, '/healthz');
            assert.equal(container.readinessProbe?.httpGet.path, '/readyz');
          }
          // A misspelt SWITCHYARD_* name would be ignored by the app without a word.
          assertEnvNamesRead(c.chart, container);
        }
      });
    }
  });
}

// The gateway refuses these at start (or, with tokens but mode none, serves
// every client): the chart says so at install, in its own value names.
describe('charts/gateway: client authentication values', { skip }, () => {
  const envOf = async (set: readonly string[]): Promise<Map<string, string | undefined>> => {
    const deployment = (await render('gateway', undefined, set)).find((m) => m.kind === 'Deployment')!;
    const env = (podOf(deployment).containers[0]!.env ?? []) as { name: string; value?: string }[];
    return new Map(env.map((e) => [e.name, e.value]));
  };

  it('refuses bearer mode without a Secret, and jwt mode without a JWKS URL', async () => {
    await assert.rejects(envOf(['auth.mode=bearer']), /auth\.mode bearer needs auth\.existingSecret/);
    await assert.rejects(envOf(['auth.mode=jwt']), /auth\.mode jwt needs auth\.jwksUrl/);
  });

  it('refuses required scopes outside jwt mode, where no token has scopes to check', async () => {
    await assert.rejects(
      envOf(['auth.mode=bearer', 'auth.existingSecret=mcp-tokens', 'auth.requiredScopes={mcp:tools}']),
      /auth\.requiredScopes needs auth\.mode jwt/,
    );
  });

  it('refuses class scopes outside jwt mode, where no token has scopes to check', async () => {
    await assert.rejects(
      envOf(['auth.mode=bearer', 'auth.existingSecret=mcp-tokens', 'auth.classScopes.prod-db={db:read}']),
      /auth\.classScopes needs auth\.mode jwt/,
    );
  });

  it('hands the gateway class scopes as JSON, and none when unset', async () => {
    const jwtSet = ['auth.mode=jwt', 'auth.jwksUrl=https://login.example.com/jwks'];
    const scoped = await envOf([...jwtSet, 'auth.classScopes.prod-db={db:read,db:write}']);
    assert.deepEqual(JSON.parse(scoped.get('SWITCHYARD_AUTH_CLASS_SCOPES')!), { 'prod-db': ['db:read', 'db:write'] });
    assert.equal((await envOf(jwtSet)).has('SWITCHYARD_AUTH_CLASS_SCOPES'), false, 'unset: none');
  });

  it('refuses a token Secret that the mode would ignore', async () => {
    await assert.rejects(envOf(['auth.existingSecret=mcp-tokens']), /auth\.mode is none, which lets every client in/);
    await assert.rejects(
      envOf(['auth.mode=jwt', 'auth.jwksUrl=https://login.example.com/jwks', 'auth.existingSecret=mcp-tokens']),
      /only auth\.mode bearer reads/,
    );
  });

  it('renders each mode with what it needs', async () => {
    const bearer = await envOf(['auth.mode=bearer', 'auth.existingSecret=mcp-tokens']);
    assert.equal(bearer.get('SWITCHYARD_AUTH_MODE'), 'bearer');
    assert.equal(bearer.get('SWITCHYARD_AUTH_TOKENS_FILE'), '/etc/switchyard/auth/tokens');
    const jwtSet = ['auth.mode=jwt', 'auth.jwksUrl=https://login.example.com/jwks'];
    const jwt = await envOf(jwtSet);
    assert.equal(jwt.get('SWITCHYARD_AUTH_JWKS_URL'), 'https://login.example.com/jwks');
    assert.equal(jwt.has('SWITCHYARD_AUTH_PRINCIPAL_CLAIM'), false, 'unset: the app default, sub');
    const byClient = await envOf([...jwtSet, 'auth.principalClaim=client_id']);
    assert.equal(byClient.get('SWITCHYARD_AUTH_PRINCIPAL_CLAIM'), 'client_id');
    assert.equal(jwt.has('SWITCHYARD_AUTH_ALGORITHMS'), false, 'unset: the app default');
    const rsaOnly = await envOf([...jwtSet, 'auth.algorithms={RS256,PS256}']);
    assert.equal(rsaOnly.get('SWITCHYARD_AUTH_ALGORITHMS'), 'RS256,PS256');
    await assert.rejects(envOf([...jwtSet, 'auth.algorithms={HS256}']), /algorithms/);
    const scoped = await envOf([...jwtSet, 'auth.requiredScopes={mcp:tools,mcp:admin}']);
    assert.equal(scoped.get('SWITCHYARD_AUTH_REQUIRED_SCOPES'), 'mcp:tools,mcp:admin');
    assert.equal(jwt.has('SWITCHYARD_AUTH_REQUIRED_SCOPES'), false, 'unset: none required');
    const entra = await envOf([...jwtSet, 'auth.scopeClaims={scp,roles}']);
    assert.equal(entra.get('SWITCHYARD_AUTH_SCOPE_CLAIMS'), 'scp,roles');
    assert.equal(jwt.has('SWITCHYARD_AUTH_SCOPE_CLAIMS'), false, 'unset: the gateway default');
    assert.equal((await envOf([])).get('SWITCHYARD_AUTH_MODE'), 'none');
  });

  it('asks for access tokens (typ at+jwt) only when told to', async () => {
    const jwtSet = ['auth.mode=jwt', 'auth.jwksUrl=https://login.example.com/jwks'];
    assert.equal((await envOf(jwtSet)).has('SWITCHYARD_AUTH_REQUIRE_ACCESS_TOKEN_TYPE'), false, 'unset: off');
    const required = await envOf([...jwtSet, 'auth.requireAccessTokenType=true']);
    assert.equal(required.get('SWITCHYARD_AUTH_REQUIRE_ACCESS_TOKEN_TYPE'), 'true');
  });

  it('hands the gateway one audience as it did, or a list of them', async () => {
    const jwtSet = ['auth.mode=jwt', 'auth.jwksUrl=https://login.example.com/jwks'];
    assert.equal((await envOf([...jwtSet, 'auth.audience=switchyard'])).get('SWITCHYARD_AUTH_AUDIENCE'), 'switchyard');
    const both = await envOf([...jwtSet, 'auth.audience={switchyard,https://mcp.example.com/mcp}']);
    assert.equal(both.get('SWITCHYARD_AUTH_AUDIENCE'), 'switchyard,https://mcp.example.com/mcp');
    assert.equal((await envOf(jwtSet)).has('SWITCHYARD_AUTH_AUDIENCE'), false, 'unset: auth.resource');
  });
});

// docs/operations.md lists `replicas` as the gateway count; with autoscaling
// on (the default) the Deployment leaves the count to the HPA.
describe('charts/gateway: replicas', { skip }, () => {
  const counts = async (set: readonly string[]) => {
    const manifests = await render('gateway', undefined, set);
    const deployment = manifests.find((m) => m.kind === 'Deployment')!;
    const hpa = manifests.find((m) => m.kind === 'HorizontalPodAutoscaler');
    if (hpa) new HorizontalPodAutoscaler(hpa as never).validate();
    const spec = hpa?.spec as { minReplicas: number; maxReplicas: number } | undefined;
    return {
      replicas: (deployment.spec as { replicas?: number }).replicas,
      min: spec?.minReplicas,
      max: spec?.maxReplicas,
    };
  };

  it('runs at least `replicas` gateways with autoscaling on, unless autoscaling.minReplicas says otherwise', async () => {
    assert.deepEqual(await counts([]), { replicas: undefined, min: 2, max: 10 });
    assert.deepEqual(await counts(['replicas=4']), { replicas: undefined, min: 4, max: 10 });
    assert.deepEqual(await counts(['replicas=4', 'autoscaling.minReplicas=3']), {
      replicas: undefined,
      min: 3,
      max: 10,
    });
    assert.deepEqual(await counts(['replicas=4', 'autoscaling.enabled=false']), {
      replicas: 4,
      min: undefined,
      max: undefined,
    });
  });

  it('refuses a maximum below the minimum', async () => {
    await assert.rejects(
      counts(['replicas=12']),
      /autoscaling\.maxReplicas \(10\) is below the minimum of 12 gateways/,
    );
  });

  // As the scheduler chart does: a budget no eviction meets holds every drain of a node running a gateway.
  it('refuses a PDB that would never let a gateway be evicted', async () => {
    for (const none of ['0', '0%']) {
      await assert.rejects(
        render('gateway', undefined, [`pdb.maxUnavailable=${none}`]),
        new RegExp(`pdb\\.maxUnavailable is ${none}: no gateway could ever be evicted`),
      );
    }
    for (const some of ['1', '25%']) {
      const pdb = (await render('gateway', undefined, [`pdb.maxUnavailable=${some}`])).find(
        (m) => m.kind === 'PodDisruptionBudget',
      )!;
      new PodDisruptionBudget(pdb as never).validate();
      assert.equal(String((pdb.spec as { maxUnavailable: unknown }).maxUnavailable), some);
    }
  });
});

describe('gateway chart contracts', { skip }, () => {
  const envOf = async (set: readonly string[] = []): Promise<Map<string, string | undefined>> => {
    const deployment = (await render('gateway', undefined, set)).find((m) => m.kind === 'Deployment')!;
    const env = (podOf(deployment).containers[0]!.env ?? []) as { name: string; value?: string }[];
    return new Map(env.map((e) => [e.name, e.value]));
  };

  // The validation above can fail: the same rendered Deployment, broken in one field, is refused.
  it('refuses a rendered Deployment whose container port is not a number', async () => {
    const deployment = (await render('gateway')).find((m) => m.kind === 'Deployment')!;
    const broken = structuredClone(deployment) as Manifest & {
      spec: { template: { spec: { containers: { ports: { containerPort: unknown }[] }[] } } };
    };
    broken.spec.template.spec.containers[0]!.ports[0]!.containerPort = 'http';
    assert.doesNotThrow(() => new Deployment(deployment as never).validate());
    assert.throws(() => new Deployment(broken as never).validate(), /containerPort/);
  });

  it('runs the gateway with the memory settings the gateway bench measures, each off when set empty', async () => {
    const defaults = await envOf();
    assert.equal(defaults.get('NODE_OPTIONS'), '--max-semi-space-size=2');
    assert.equal(defaults.get('GLIBC_TUNABLES'), 'glibc.malloc.mmap_threshold=10000');
    const off = await envOf(['nodeOptions=', 'glibcTunables=']);
    assert.equal(off.has('NODE_OPTIONS'), false);
    assert.equal(off.has('GLIBC_TUNABLES'), false);
  });

  it('hands the gateway the trusted proxies as it reads them, none by default', async () => {
    const read = async (env: Map<string, string | undefined>): Promise<string> => {
      const value = env.get('SWITCHYARD_TRUSTED_PROXIES');
      assert.notEqual(value, undefined);
      const { stdout } = await run(
        process.execPath,
        [join(root, 'apps/gateway/src/main.ts'), '--schedulers', 'http://127.0.0.1:1', '--print-config'],
        { env: { ...process.env, SWITCHYARD_TRUSTED_PROXIES: value } },
      );
      return /^trustedProxies:.*(?:\n {2}- .*)*/m.exec(stdout)?.[0] ?? stdout;
    };
    assert.equal(await read(await envOf()), 'trustedProxies: []');
    const set = await envOf(['trustedProxies={10.0.0.0/8,fd00::/8}']);
    assert.equal(await read(set), 'trustedProxies:\n  - 10.0.0.0/8\n  - fd00::/8');
  });
});

// Both dial schedulers, which may sit behind TLS with a private CA.
for (const chart of ['gateway', 'runtime']) {
  describe(`charts/${chart}: trustedCA`, { skip }, () => {
    type Pod = {
      containers: { env?: { name: string; value?: string }[]; volumeMounts?: Record<string, unknown>[] }[];
      volumes?: { name: string; configMap?: { name: string } }[];
    };
    const podWith = async (set: readonly string[] = []): Promise<Pod> => {
      const workload = (await render(chart, undefined, set)).find((m) => m.kind === 'Deployment')!;
      new Deployment(workload as never).validate();
      return (workload.spec as { template: { spec: Pod } }).template.spec;
    };

    it('mounts the ConfigMap and points NODE_EXTRA_CA_CERTS at its key; sets neither by default', async () => {
      const pod = await podWith(['trustedCA.existingConfigMap=corp-ca', 'trustedCA.key=bundle.pem']);
      const container = pod.containers[0]!;
      assert.equal(
        container.env?.find((e) => e.name === 'NODE_EXTRA_CA_CERTS')?.value,
        '/etc/switchyard/ca/bundle.pem',
      );
      assert.deepEqual(
        container.volumeMounts?.find((v) => v.name === 'trusted-ca'),
        { name: 'trusted-ca', mountPath: '/etc/switchyard/ca', readOnly: true },
      );
      assert.deepEqual(
        pod.volumes?.find((v) => v.name === 'trusted-ca'),
        {
          name: 'trusted-ca',
          configMap: { name: 'corp-ca' },
        },
      );
      const plain = await podWith();
      assert.equal(
        plain.containers[0]!.env?.some((e) => e.name === 'NODE_EXTRA_CA_CERTS'),
        false,
      );
      assert.equal(
        plain.volumes?.some((v) => v.name === 'trusted-ca'),
        false,
      );
    });

    it('refuses an empty key', async () => {
      await assert.rejects(podWith(['trustedCA.existingConfigMap=corp-ca', 'trustedCA.key=']), /key/);
    });
  });
}

// Each Ingress lets in from outside the cluster exactly what outside clients
// need: MCP clients /mcp and its OAuth metadata (the gateway), runtimes the tunnel's connect path
// (the scheduler, whose other endpoints have no authentication of their own).
const INGRESSES = [
  {
    chart: 'gateway',
    host: 'mcp.example.com',
    paths: [
      { path: '/mcp', pathType: 'Prefix' },
      // What MCP clients discover authorization servers from (auth mode jwt).
      { path: '/.well-known/oauth-protected-resource', pathType: 'Prefix' },
    ],
  },
  { chart: 'scheduler', host: 'scheduler.example.com', paths: [{ path: CONNECT_PATH, pathType: 'Exact' }] },
];
type IngressSpec = {
  ingressClassName?: string;
  tls?: { secretName: string; hosts: string[] }[];
  rules: {
    host?: string;
    http: {
      paths: { path: string; pathType: string; backend: { service: { name: string; port: { name: string } } } }[];
    };
  }[];
};
for (const c of INGRESSES) {
  describe(`charts/${c.chart}: ingress`, { skip }, () => {
    it('renders none by default', async () => {
      assert.equal((await render(c.chart)).filter((m) => m.kind === 'Ingress').length, 0);
    });

    it(`routes only ${c.paths.map((p) => p.path).join(', ')} to the Service, per host, with the certificates given`, async () => {
      const manifests = await render(c.chart, `test/charts/values-production-${c.chart}.yaml`);
      const ingresses = manifests.filter((m) => m.kind === 'Ingress');
      assert.equal(ingresses.length, 1);
      const spec = ingresses[0]!.spec as IngressSpec;
      assert.equal(spec.ingressClassName, 'nginx');
      assert.deepEqual(spec.tls, [{ secretName: `${c.host.replaceAll('.', '-')}`, hosts: [c.host] }]);
      // The backend is the Service every ready replica sits behind (not the scheduler's headless one, nor
      // the gateway's metrics Service).
      type Labelled = Manifest & { metadata: { labels?: Record<string, string> } };
      const service = (manifests as Labelled[]).find(
        (m) =>
          m.kind === 'Service' &&
          !(m.spec as { clusterIP?: string }).clusterIP &&
          m.metadata.labels?.['app.kubernetes.io/component'] !== 'metrics',
      )!;
      const ports = (service.spec as { ports: { name: string }[] }).ports.map((p) => p.name);
      assert.deepEqual(
        spec.rules.map((r) => ({
          host: r.host,
          paths: r.http.paths.map((p) => ({ path: p.path, pathType: p.pathType })),
          backends: r.http.paths.map((p) => p.backend.service.name),
        })),
        [{ host: c.host, paths: c.paths, backends: c.paths.map(() => service.metadata.name) }],
      );
      for (const p of spec.rules[0]!.http.paths) assert.ok(ports.includes(p.backend.service.port.name));
    });

    it('routes every host when none is given', async () => {
      const ingress = (await render(c.chart, undefined, ['ingress.enabled=true'])).find((m) => m.kind === 'Ingress')!;
      new Ingress(ingress as never).validate();
      const spec = ingress.spec as IngressSpec;
      assert.equal(spec.rules.length, 1);
      assert.equal(spec.rules[0]!.host, undefined);
      assert.equal(spec.tls, undefined);
    });

    // Kubernetes takes only strings there; a bare number would fail the install later, less clearly.
    it('refuses an annotation value that is not a string', async () => {
      await assert.rejects(
        render(c.chart, undefined, ['ingress.enabled=true', 'ingress.annotations.example\\.com/timeout=3600']),
        /ingress\.annotations\.example\.com\/timeout: Invalid type. Expected: string/,
      );
    });
  });
}

// Tokens come from Secrets mounted as files, which kubelet updates in a
// running pod and the apps read again; a Secret in the environment is fixed
// for the life of the container, so a rotation would need a restart.
describe('charts: tokens as mounted files', { skip }, () => {
  const cases = [
    { chart: 'gateway', set: ['upstreamMode=direct', 'upstreamToken.existingSecret=switchyard-direct'] },
    { chart: 'runtime', set: [] },
    { chart: 'scheduler', set: ['apiTokens.existingSecret=switchyard-api'] },
  ];
  for (const c of cases) {
    it(`${c.chart}: takes no token from a Secret into the environment`, async () => {
      const manifests = await render(c.chart, `test/charts/values-production-${c.chart}.yaml`, c.set);
      const workload = manifests.find((m) => ['Deployment', 'DaemonSet', 'StatefulSet'].includes(m.kind))!;
      const env = (podOf(workload) as unknown as SecretPod).containers[0]!.env ?? [];
      const fromSecrets = env.filter((e) => e.valueFrom?.secretKeyRef !== undefined).map((e) => e.name);
      assert.deepEqual(
        fromSecrets.filter((name) => name.includes('TOKEN')),
        [],
      );
      assert.ok(
        env.some((e) => /^SWITCHYARD_.*TOKENS?_FILE$/.test(e.name)),
        'a token file is named',
      );
    });
  }
});

// The scheduler API's tokens: a file from a Secret on the schedulers, the
// first line of one on the gateways, each read again when it changes.
describe('charts: scheduler API and peer tokens', { skip }, () => {
  type Env = { name: string; value?: string; valueFrom?: { secretKeyRef?: { name: string; key: string } } };
  type Pod = {
    containers: { env?: Env[]; volumeMounts?: { name: string; mountPath: string }[] }[];
    volumes?: { name: string; secret?: { secretName: string } }[];
  };
  const workloadOf = (manifests: Manifest[]): Pod =>
    podOf(manifests.find((m) => ['StatefulSet', 'Deployment'].includes(m.kind))!) as unknown as Pod;

  // The scheduler's two kinds of token, made or mounted alike: gateways' and operators' on its API, and the
  // replicas' own for epoch sync (without which join tokens admit peers).
  const kinds = [
    {
      value: 'apiTokens',
      name: 'api',
      env: 'SWITCHYARD_API_TOKEN_FILE',
      existing: ['values-production-scheduler.yaml'],
    },
    { value: 'peerTokens', name: 'peer', env: 'SWITCHYARD_PEER_TOKEN_FILE', existing: [] },
  ] as const;
  for (const t of kinds) {
    const secretName = `sy-scheduler-${t.name}`;
    const volume = `${t.name}-tokens`;
    const renderExisting = (): Promise<Manifest[]> =>
      t.existing.length > 0
        ? render('scheduler', `test/charts/${t.existing[0]}`)
        : render('scheduler', undefined, [`${t.value}.existingSecret=switchyard-${t.name}`]);

    it(`scheduler: creates the ${t.value} Secret from values and points ${t.env} at its mounted key`, async () => {
      const token = `${t.name}-token-0123456789abcdef`;
      const manifests = await render('scheduler', undefined, [`${t.value}.values={${token}}`]);
      const secret = manifests.find((m) => m.kind === 'Secret' && m.metadata.name === secretName)!;
      assert.deepEqual(secret.stringData, { tokens: `${token}\n` });
      const pod = workloadOf(manifests);
      const env = pod.containers[0]!.env!.find((e) => e.name === t.env);
      assert.equal(env?.value, `/etc/switchyard/${t.name}/tokens`);
      assert.deepEqual(
        pod.containers[0]!.volumeMounts!.find((v) => v.name === volume),
        { name: volume, mountPath: `/etc/switchyard/${t.name}`, readOnly: true },
      );
      assert.equal(pod.volumes!.find((v) => v.name === volume)?.secret?.secretName, secretName);
    });

    it(`scheduler: mounts an existing ${t.value} Secret instead, and sets nothing without tokens`, async () => {
      const existing = workloadOf(await renderExisting());
      assert.equal(existing.volumes!.find((v) => v.name === volume)?.secret?.secretName, `switchyard-${t.name}`);
      const manifests = await render('scheduler');
      assert.equal(manifests.filter((m) => m.metadata.name === secretName).length, 0);
      const pod = workloadOf(manifests);
      assert.equal(
        pod.containers[0]!.env!.some((e) => e.name === t.env),
        false,
      );
      assert.equal(
        pod.volumes!.some((v) => v.name === volume),
        false,
      );
    });

    it(`scheduler: refuses ${t.value} too short to be one`, async () => {
      await assert.rejects(
        render('scheduler', undefined, [`${t.value}.values={short}`]),
        new RegExp(`${t.value}\\.values\\.0`),
      );
    });
  }

  it("gateway: reads its token from the Secret's key, mounted read-only, and sets nothing without one", async () => {
    const pod = workloadOf(await render('gateway', 'test/charts/values-production-gateway.yaml'));
    assert.deepEqual(secretFileOf(pod as SecretPod, 'SWITCHYARD_SCHEDULER_TOKEN_FILE'), {
      secret: 'switchyard-api',
      key: 'tokens',
      readOnly: true,
    });
    const plain = workloadOf(await render('gateway'));
    assert.equal(
      plain.containers[0]!.env!.some((e) => e.name.startsWith('SWITCHYARD_SCHEDULER_TOKEN')),
      false,
    );
    assert.equal(
      plain.volumes?.some((v) => v.name === 'scheduler-token'),
      false,
    );
  });
});

// Direct mode: runtimes advertise a listener on their pod IP, gateways dial
// it with the token both read from a Secret.
describe('charts: direct mode', { skip }, () => {
  type Env = { name: string; value?: string; valueFrom?: Record<string, unknown> };
  type Container = { env: Env[]; ports?: { name: string; containerPort: number }[] };
  const workloadPod = (manifests: Manifest[]): SecretPod =>
    podOf(manifests.find((m) => ['Deployment', 'DaemonSet'].includes(m.kind))!) as unknown as SecretPod;
  const containerOf = (manifests: Manifest[]): Container =>
    workloadPod(manifests).containers[0] as unknown as Container;

  it('runtime: serves the listener on its port and advertises the pod IP, the tokens from the Secret', async () => {
    const manifests = await render('runtime', 'test/charts/values-production-runtime.yaml');
    const container = containerOf(manifests);
    assert.deepEqual(
      container.ports?.find((p) => p.name === 'direct'),
      { name: 'direct', containerPort: 7080, protocol: 'TCP' },
    );
    const names = container.env.map((e) => e.name);
    const env = new Map(container.env.map((e) => [e.name, e]));
    assert.equal(env.get('SWITCHYARD_DIRECT_LISTEN_ENABLED')?.value, 'true');
    assert.equal(env.get('SWITCHYARD_DIRECT_LISTEN_PORT')?.value, '7080');
    assert.equal(env.get('SWITCHYARD_DIRECT_LISTEN_ADVERTISE_URL')?.value, 'http://$(POD_IP):7080');
    assert.deepEqual(env.get('POD_IP')?.valueFrom, { fieldRef: { fieldPath: 'status.podIP' } });
    // Kubernetes expands $(POD_IP) only from variables defined before it.
    assert.ok(names.indexOf('POD_IP') < names.indexOf('SWITCHYARD_DIRECT_LISTEN_ADVERTISE_URL'));
    assert.equal(env.has('SWITCHYARD_DIRECT_LISTEN_TOKEN'), false);
    assert.deepEqual(secretFileOf(workloadPod(manifests), 'SWITCHYARD_DIRECT_LISTEN_TOKEN_FILE'), {
      secret: 'switchyard-direct',
      key: 'token',
      readOnly: true,
    });
    const plain = containerOf(await render('runtime'));
    assert.equal(
      plain.ports?.some((p) => p.name === 'direct'),
      false,
    );
    assert.equal(
      plain.env.some((e) => e.name.startsWith('SWITCHYARD_DIRECT_LISTEN')),
      false,
    );
  });

  it('runtime: caps the listener at directListener.connectionsMax, 16384 unless set', async () => {
    const enabled = ['directListener.enabled=true', 'directListener.token.existingSecret=switchyard-direct'];
    const capOf = async (set: readonly string[]): Promise<string | undefined> =>
      containerOf(await render('runtime', undefined, set)).env.find(
        (e) => e.name === 'SWITCHYARD_DIRECT_LISTEN_CONNECTIONS_MAX',
      )?.value;
    assert.equal(await capOf(enabled), '16384');
    assert.equal(await capOf([...enabled, 'directListener.connectionsMax=2048']), '2048');
    assert.equal(await capOf([]), undefined, 'no listener, no cap');
    await assert.rejects(capOf([...enabled, 'directListener.connectionsMax=0']), /directListener\.connectionsMax/);
  });

  it('runtime: refuses a listener without a token', async () => {
    await assert.rejects(render('runtime', undefined, ['directListener.enabled=true']), /directListener\.token/);
  });

  it("gateway: reads upstreamToken from its Secret's key, mounted read-only, and refuses direct mode without one", async () => {
    const manifests = await render('gateway', undefined, [
      'upstreamMode=direct',
      'upstreamToken.existingSecret=switchyard-direct',
      'upstreamToken.key=gateways',
    ]);
    const env = new Map(containerOf(manifests).env.map((e) => [e.name, e]));
    assert.equal(env.get('SWITCHYARD_UPSTREAM_MODE')?.value, 'direct');
    assert.equal(env.has('SWITCHYARD_UPSTREAM_TOKEN'), false);
    assert.deepEqual(secretFileOf(workloadPod(manifests), 'SWITCHYARD_UPSTREAM_TOKEN_FILE'), {
      secret: 'switchyard-direct',
      key: 'gateways',
      readOnly: true,
    });
    await assert.rejects(render('gateway', undefined, ['upstreamMode=direct']), /upstreamToken\.existingSecret/);
  });
});

// Prometheus Operator: each ServiceMonitor selects exactly one of its
// chart's Services (the scheduler's two would scrape every replica twice)
// and scrapes /metrics on a port that Service has.
for (const chart of ['gateway', 'scheduler']) {
  describe(`charts/${chart}: serviceMonitor`, { skip }, () => {
    type Labelled = Manifest & { metadata: { labels?: Record<string, string> } };
    type MonitorSpec = {
      selector: { matchLabels: Record<string, string> };
      endpoints: { port: string; path: string; interval: string }[];
    };

    it('renders none by default', async () => {
      assert.equal((await render(chart)).filter((m) => m.kind === 'ServiceMonitor').length, 0);
    });

    it('selects one Service and scrapes /metrics on its port, with the labels the operator looks for', async () => {
      const manifests = (await render(chart, `test/charts/values-production-${chart}.yaml`)) as Labelled[];
      const monitors = manifests.filter((m) => m.kind === 'ServiceMonitor');
      assert.equal(monitors.length, 1);
      const monitor = monitors[0]!;
      assert.equal(monitor.metadata.labels?.release, 'prometheus');
      const spec = monitor.spec as MonitorSpec;
      const selected = manifests.filter(
        (m) =>
          m.kind === 'Service' &&
          Object.entries(spec.selector.matchLabels).every(([k, v]) => m.metadata.labels?.[k] === v),
      );
      assert.equal(selected.length, 1, selected.map((m) => m.metadata.name).join(','));
      const ports = (selected[0]!.spec as { ports: { name: string }[] }).ports.map((p) => p.name);
      assert.deepEqual(
        spec.endpoints.map((e) => ({ path: e.path, known: ports.includes(e.port) })),
        [{ path: '/metrics', known: true }],
      );
      assert.equal(spec.endpoints[0]!.interval, chart === 'scheduler' ? '15s' : '30s');
    });

    it('refuses an interval Prometheus would not take', async () => {
      await assert.rejects(
        render(chart, undefined, ['serviceMonitor.enabled=true', 'serviceMonitor.interval=30 seconds']),
        /serviceMonitor\.interval/,
      );
    });
  });
}

// metricsPort, on by default: /metrics on a port of its own, behind a
// ClusterIP Service of its own, so that a LoadBalancer Service for /mcp does
// not publish it, and the liveness probe there, so that a flood holding the
// /mcp port full (connectionsMax) does not get the pod restarted.
describe('charts/gateway: metricsPort', { skip }, () => {
  type Port = { name: string; port?: number; containerPort?: number };
  type Labelled = Manifest & { metadata: { labels?: Record<string, string> } };
  type Probed = { env?: { name: string; value?: string }[]; ports: Port[] } & Record<
    string,
    { httpGet: { path: string; port: string; scheme: string } }
  >;
  const services = (manifests: Manifest[]): Labelled[] => manifests.filter((m) => m.kind === 'Service');
  const portsOf = (service: Manifest): string[] => (service.spec as { ports: Port[] }).ports.map((p) => p.name);
  const containerOf = (manifests: Manifest[]): Probed =>
    podOf(manifests.find((m) => m.kind === 'Deployment')!).containers[0]! as unknown as Probed;

  it('serves /metrics and liveness on 8081 by default, behind a metrics Service, with readiness on /mcp', async () => {
    const manifests = await render('gateway', undefined, ['serviceMonitor.enabled=true']);
    const container = containerOf(manifests);
    assert.deepEqual(
      container.ports.find((p) => p.name === 'metrics'),
      { name: 'metrics', containerPort: 8081 },
    );
    assert.equal(container.env?.find((e) => e.name === 'SWITCHYARD_METRICS_PORT')?.value, '8081');
    assert.deepEqual(container.livenessProbe!.httpGet, { path: '/healthz', port: 'metrics', scheme: 'HTTP' });
    assert.deepEqual(container.readinessProbe!.httpGet, { path: '/readyz', port: 'http', scheme: 'HTTP' });
    assert.deepEqual(
      services(manifests).map((s) => [s.metadata.name, portsOf(s)]),
      [
        ['sy-gateway-metrics', ['metrics']],
        ['sy-gateway', ['http']],
      ],
    );
    const monitor = manifests.find((m) => m.kind === 'ServiceMonitor')!;
    assert.equal((monitor.spec as { endpoints: { port: string }[] }).endpoints[0]!.port, 'metrics');
  });

  it('keeps /metrics and liveness on the /mcp port when null, with no Service of its own', async () => {
    const manifests = await render('gateway', undefined, ['metricsPort=null', 'serviceMonitor.enabled=true']);
    assert.deepEqual(services(manifests).map(portsOf), [['http']]);
    const container = containerOf(manifests);
    assert.deepEqual(
      container.ports.map((p) => p.name),
      ['http'],
    );
    assert.equal(
      container.env?.some((e) => e.name === 'SWITCHYARD_METRICS_PORT'),
      false,
    );
    assert.deepEqual(container.livenessProbe!.httpGet, { path: '/healthz', port: 'http', scheme: 'HTTP' });
    const monitor = manifests.find((m) => m.kind === 'ServiceMonitor')!;
    new ServiceMonitor(monitor as never).validate();
    const spec = monitor.spec as { selector: { matchLabels: Record<string, string> }; endpoints: { port: string }[] };
    assert.equal(spec.endpoints[0]!.port, 'http');
    assert.equal(spec.selector.matchLabels['app.kubernetes.io/component'], undefined);
  });

  it('serves it on a ClusterIP Service of its own, which alone the ServiceMonitor scrapes, in plain HTTP', async () => {
    const set = ['metricsPort=9090', 'service.type=LoadBalancer', 'serviceMonitor.enabled=true'];
    const manifests = (await render('gateway', undefined, [...set, 'tls.existingSecret=own-tls'])) as Labelled[];
    const [mcp, metrics] = [
      services(manifests).find((s) => portsOf(s).includes('http'))!,
      services(manifests).find((s) => portsOf(s).includes('metrics'))!,
    ];
    assert.deepEqual(portsOf(mcp), ['http'], 'the published Service has no metrics port');
    assert.equal((mcp.spec as { type: string }).type, 'LoadBalancer');
    assert.equal((metrics.spec as { type: string }).type, 'ClusterIP');
    assert.equal(metrics.metadata.name, 'sy-gateway-metrics');
    const deployment = manifests.find((m) => m.kind === 'Deployment')!;
    new Deployment(deployment as never).validate();
    const container = podOf(deployment).containers[0]! as unknown as {
      env?: { name: string; value?: string }[];
      ports: Port[];
    };
    assert.deepEqual(
      container.ports.find((p) => p.name === 'metrics'),
      { name: 'metrics', containerPort: 9090 },
    );
    assert.equal(container.env?.find((e) => e.name === 'SWITCHYARD_METRICS_PORT')?.value, '9090');
    // A flood holding the /mcp port full (connectionsMax) must not fail liveness, or the pod restarts.
    const probes = container as unknown as Record<string, { httpGet: { port: string; scheme: string } }>;
    assert.deepEqual(probes.livenessProbe!.httpGet, { path: '/healthz', port: 'metrics', scheme: 'HTTP' });
    assert.equal(probes.readinessProbe!.httpGet.port, 'http', 'readiness still says whether /mcp takes clients');
    const monitor = manifests.find((m) => m.kind === 'ServiceMonitor')!;
    new ServiceMonitor(monitor as never).validate();
    const spec = monitor.spec as {
      selector: { matchLabels: Record<string, string> };
      endpoints: Record<string, unknown>[];
    };
    const selected = services(manifests).filter((s) =>
      Object.entries(spec.selector.matchLabels).every(([k, v]) => s.metadata.labels?.[k] === v),
    );
    assert.deepEqual(
      selected.map((s) => s.metadata.name),
      ['sy-gateway-metrics'],
    );
    assert.equal(spec.endpoints[0]!.port, 'metrics');
    assert.equal(spec.endpoints[0]!.scheme, undefined, 'the metrics port serves plain HTTP even where /mcp serves TLS');
  });

  it('refuses a metricsPort that is no port', async () => {
    await assert.rejects(render('gateway', undefined, ['metricsPort=70000']), /metricsPort/);
  });

  // A release that had set port 8081 while metricsPort was off by default would otherwise render two listeners
  // on one port: every pod crash-looping on the second bind.
  it('refuses port and metricsPort the same, naming both', async () => {
    await assert.rejects(render('gateway', undefined, ['port=8081']), /metricsPort \(8081\) .*port/);
    await assert.rejects(render('gateway', undefined, ['port=9090', 'metricsPort=9090']), /metricsPort \(9090\)/);
    await render('gateway', undefined, ['port=8081', 'metricsPort=null']);
  });
});

// The scheduler's metricsPort, on by default: a replica has one port, which a
// flood can hold full (connectionsMax); liveness and scrapes go to a listener
// of its own, readiness stays with the port it speaks for.
describe('charts/scheduler: metricsPort', { skip }, () => {
  type Port = { name: string; port?: number; containerPort?: number };
  type Probed = { env?: { name: string; value?: string }[]; ports: Port[] } & Record<
    string,
    { httpGet: { path: string; port: string; scheme: string } }
  >;
  const portsOf = (service: Manifest): string[] => (service.spec as { ports: Port[] }).ports.map((p) => p.name);

  it('probes liveness and scrapes /metrics on it in plain HTTP, even with tls, and admits it in the NetworkPolicy', async () => {
    const set = ['serviceMonitor.enabled=true', 'tls.existingSecret=own-tls', 'networkPolicy.enabled=true'];
    const manifests = await render('scheduler', undefined, set);
    const statefulSet = manifests.find((m) => m.kind === 'StatefulSet')!;
    new StatefulSet(statefulSet as never).validate();
    const container = podOf(statefulSet).containers[0]! as unknown as Probed;
    assert.deepEqual(
      container.ports.find((p) => p.name === 'metrics'),
      { name: 'metrics', containerPort: 7071 },
    );
    assert.equal(container.env?.find((e) => e.name === 'SWITCHYARD_METRICS_PORT')?.value, '7071');
    assert.deepEqual(container.livenessProbe!.httpGet, { path: '/healthz', port: 'metrics', scheme: 'HTTP' });
    assert.deepEqual(container.readinessProbe!.httpGet, { path: '/readyz', port: 'http', scheme: 'HTTPS' });
    const monitor = manifests.find((m) => m.kind === 'ServiceMonitor')!;
    new ServiceMonitor(monitor as never).validate();
    const endpoint = (monitor.spec as { endpoints: Record<string, unknown>[] }).endpoints[0]!;
    assert.deepEqual(endpoint, { port: 'metrics', path: '/metrics', interval: '30s' });
    const peers = manifests.find((m) => m.kind === 'Service' && m.metadata.name === 'sy-scheduler-peers')!;
    assert.deepEqual(portsOf(peers), ['http', 'metrics'], 'the Service the ServiceMonitor selects has the port');
    const policy = manifests.find((m) => m.kind === 'NetworkPolicy')!;
    const ports = (policy.spec as { ingress: { ports: { port: string }[] }[] }).ingress[0]!.ports.map((p) => p.port);
    assert.deepEqual(ports, ['http', 'metrics']);
  });

  it('leaves probes and scrapes on the replica port when null, and refuses one that is no port', async () => {
    const manifests = await render('scheduler', undefined, ['metricsPort=null', 'serviceMonitor.enabled=true']);
    const container = podOf(manifests.find((m) => m.kind === 'StatefulSet')!).containers[0]! as unknown as Probed;
    assert.deepEqual(
      container.ports.map((p) => p.name),
      ['http'],
    );
    assert.equal(
      container.env?.some((e) => e.name === 'SWITCHYARD_METRICS_PORT'),
      false,
    );
    assert.equal(container.livenessProbe!.httpGet.port, 'http');
    const monitor = manifests.find((m) => m.kind === 'ServiceMonitor')!;
    assert.equal((monitor.spec as { endpoints: { port: string }[] }).endpoints[0]!.port, 'http');
    await assert.rejects(render('scheduler', undefined, ['metricsPort=70000']), /metricsPort/);
  });

  it('refuses port and metricsPort the same, naming both', async () => {
    await assert.rejects(render('scheduler', undefined, ['port=7071']), /metricsPort \(7071\) .*port/);
    await render('scheduler', undefined, ['port=7071', 'metricsPort=null']);
  });
});

// Runtimes have no Service: a PodMonitor scrapes each pod on the health
// port the probes use.
describe('charts/runtime: health port and podMonitor', { skip }, () => {
  type Container = {
    ports?: { name: string; containerPort: number }[];
    env?: { name: string; value?: string }[];
    livenessProbe?: { httpGet: { port: string } };
    readinessProbe?: { httpGet: { port: string } };
  };
  const containerOf = (manifests: Manifest[]): Container =>
    podOf(manifests.find((m) => m.kind === 'Deployment' || m.kind === 'DaemonSet')!).containers[0] as Container;

  it('probes the health port it names and passes it to the runtime', async () => {
    const container = containerOf(await render('runtime'));
    assert.deepEqual(container.ports, [{ name: 'health', containerPort: 7090, protocol: 'TCP' }]);
    assert.equal(container.env?.find((e) => e.name === 'SWITCHYARD_HEALTH_PORT')?.value, '7090');
    assert.equal(container.livenessProbe?.httpGet.port, 'health');
    assert.equal(container.readinessProbe?.httpGet.port, 'health');
  });

  it('turns the listener and its probes off with port 0', async () => {
    const container = containerOf(await render('runtime', undefined, ['health.port=0']));
    assert.equal(container.ports, undefined);
    assert.equal(container.livenessProbe, undefined);
    assert.equal(
      container.env?.some((e) => e.name === 'SWITCHYARD_HEALTH_PORT'),
      false,
    );
  });

  // As the scheduler and gateway charts refuse metricsPort = port: the second bind fails and every pod crash-loops.
  it("refuses a health port that is the direct listener's, naming both", async () => {
    const direct = ['directListener.enabled=true', 'directListener.token.existingSecret=runtime-direct'];
    await assert.rejects(
      render('runtime', undefined, [...direct, 'health.port=7080']),
      /health\.port \(7080\) is directListener\.port too/,
    );
    await render('runtime', undefined, ['health.port=7080']);
    await render('runtime', undefined, [...direct, 'health.port=0', 'directListener.port=7080']);
  });

  it('renders a PodMonitor selecting the runtime pods on their health port, when asked', async () => {
    assert.equal((await render('runtime')).filter((m) => m.kind === 'PodMonitor').length, 0);
    const manifests = await render('runtime', undefined, ['podMonitor.enabled=true', 'podMonitor.labels.release=prom']);
    const monitor = manifests.find((m) => m.kind === 'PodMonitor') as Manifest & {
      metadata: { labels: Record<string, string> };
      spec: {
        selector: { matchLabels: Record<string, string> };
        podMetricsEndpoints: { port: string; path: string }[];
      };
    };
    assert.equal(monitor.metadata.labels.release, 'prom');
    const deployment = manifests.find((m) => m.kind === 'Deployment') as Manifest & {
      spec: { template: { metadata: { labels: Record<string, string> } } };
    };
    const podLabels = deployment.spec.template.metadata.labels;
    for (const [k, v] of Object.entries(monitor.spec.selector.matchLabels)) assert.equal(podLabels[k], v, k);
    assert.deepEqual(
      monitor.spec.podMetricsEndpoints.map((e) => [e.port, e.path]),
      [['health', '/metrics']],
    );
    await assert.rejects(render('runtime', undefined, ['podMonitor.enabled=true', 'health.port=0']), /health\.port/);
  });
});

// Its own container's PID 1 would keep the orphans of stdio servers' trees as
// zombies (test/charts/pid-one.test.ts); the pause container of a shared
// process namespace reaps them.
describe('charts/runtime: process namespace', { skip }, () => {
  const podSpecOf = async (set: string[] = []) =>
    podOf((await render('runtime', undefined, set)).find((m) => m.kind === 'Deployment')!) as unknown as {
      shareProcessNamespace?: boolean;
      containers: { name: string }[];
    };

  it("shares it by default, and the pod has no other container to see the runtime's processes", async () => {
    const pod = await podSpecOf();
    assert.equal(pod.shareProcessNamespace, true);
    assert.deepEqual(
      pod.containers.map((c) => c.name),
      ['runtime'],
    );
  });

  it('keeps it apart when asked', async () => {
    assert.equal((await podSpecOf(['shareProcessNamespace=false'])).shareProcessNamespace, false);
  });
});

// The scheduler's NetworkPolicy admits the pods of all three charts, as
// rendered, and the extra peers given, on the port the replica listens on.
describe('charts/scheduler: networkPolicy', { skip }, () => {
  type Selector = { matchLabels?: Record<string, string> };
  type PolicySpec = {
    podSelector: Selector;
    ingress: { from: { podSelector?: Selector; namespaceSelector?: Selector }[]; ports: { port: string }[] }[];
  };
  const matches = (selector: Selector, labels: Record<string, string>): boolean =>
    Object.entries(selector.matchLabels ?? {}).every(([k, v]) => labels[k] === v);
  const podLabelsOf = async (chart: string): Promise<Record<string, string>> => {
    const workload = (await render(chart)).find((m) => ['Deployment', 'StatefulSet', 'DaemonSet'].includes(m.kind))!;
    return (workload.spec as { template: { metadata: { labels: Record<string, string> } } }).template.metadata.labels;
  };

  it('renders none by default', async () => {
    assert.equal((await render('scheduler')).filter((m) => m.kind === 'NetworkPolicy').length, 0);
  });

  it("guards the scheduler pods' port, admitting gateway, runtime and scheduler pods and the peers given", async () => {
    const manifests = await render('scheduler', 'test/charts/values-production-scheduler.yaml');
    const spec = manifests.find((m) => m.kind === 'NetworkPolicy')!.spec as PolicySpec;
    assert.ok(matches(spec.podSelector, await podLabelsOf('scheduler')), 'selects the scheduler pods');
    assert.equal(spec.ingress.length, 1);
    const [rule] = spec.ingress;
    const container = podOf(manifests.find((m) => m.kind === 'StatefulSet')!).containers[0] as unknown as {
      ports: { name: string }[];
    };
    assert.deepEqual(
      rule!.ports.map((p) => p.port),
      container.ports.map((p) => p.name),
    );
    const pods = rule!.from.filter((f) => f.podSelector && !f.namespaceSelector);
    for (const chart of ['gateway', 'runtime', 'scheduler']) {
      const labels = await podLabelsOf(chart);
      assert.ok(
        pods.some((f) => matches(f.podSelector!, labels)),
        `${chart} pods (${JSON.stringify(labels)}) are admitted`,
      );
    }
    assert.deepEqual(
      rule!.from.filter((f) => f.namespaceSelector),
      [{ namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'ingress-nginx' } } }],
    );
  });
});

describe('scheduler chart contracts', { skip }, () => {
  it('grants exactly get, create and update on leases, get/update limited to the lease name', async () => {
    const role = (await render('scheduler')).find((m) => m.kind === 'Role')!;
    const rules = role.rules as {
      apiGroups: string[];
      resources: string[];
      verbs: string[];
      resourceNames?: string[];
    }[];
    const verbs = new Set<string>();
    for (const rule of rules) {
      assert.deepEqual(rule.apiGroups, ['coordination.k8s.io']);
      assert.deepEqual(rule.resources, ['leases']);
      for (const v of rule.verbs) verbs.add(v);
      if (rule.verbs.includes('get') || rule.verbs.includes('update'))
        assert.deepEqual(rule.resourceNames, ['sy-scheduler']);
    }
    assert.deepEqual([...verbs].sort(), ['create', 'get', 'update']);
  });

  const pdbCases = [
    { name: 'defaults keep two replicas available', file: undefined, spec: { minAvailable: 2 } },
    {
      name: 'production allows one unavailable',
      file: 'test/charts/values-production-scheduler.yaml',
      spec: { maxUnavailable: 1 },
    },
  ];
  for (const p of pdbCases) {
    it(`PDB: ${p.name}`, async () => {
      const pdb = (await render('scheduler', p.file)).find((m) => m.kind === 'PodDisruptionBudget')!;
      const spec = pdb.spec as Record<string, unknown>;
      for (const [k, v] of Object.entries(p.spec)) assert.equal(spec[k], v);
      assert.equal(Object.keys(spec).filter((k) => k !== 'selector').length, 1);
    });
  }

  // A budget no eviction can meet blocks every node drain of the nodes running a replica.
  it('refuses a PDB that would never let a replica be evicted', async () => {
    for (const replicas of [1, 2]) {
      await assert.rejects(
        render('scheduler', undefined, [`replicas=${replicas}`]),
        new RegExp(`pdb\\.minAvailable \\(2\\) is not below replicas \\(${replicas}\\)`),
      );
    }
    await assert.rejects(
      render('scheduler', undefined, ['pdb.minAvailable=3']),
      /pdb\.minAvailable \(3\) is not below replicas \(3\)/,
    );
    await assert.rejects(render('scheduler', undefined, ['pdb.maxUnavailable=0']), /pdb\.maxUnavailable is 0/);
    for (const set of [['replicas=2', 'pdb.maxUnavailable=1'], ['replicas=1', 'pdb.enabled=false'], ['replicas=3']]) {
      const pdbs = (await render('scheduler', undefined, set)).filter((m) => m.kind === 'PodDisruptionBudget');
      for (const pdb of pdbs) new PodDisruptionBudget(pdb as never).validate();
      assert.equal(pdbs.length, set.includes('pdb.enabled=false') ? 0 : 1, set.join(' '));
    }
  });

  it('takes replica id from the pod name, advertises the pod IP and elects through the kubernetes backend', async () => {
    const manifests = await render('scheduler');
    const sts = manifests.find((m) => m.kind === 'StatefulSet')!;
    const env = (podOf(sts).containers[0]!.env ?? []) as {
      name: string;
      value?: string;
      valueFrom?: { fieldRef?: { fieldPath: string } };
    }[];
    const byName = new Map(env.map((e) => [e.name, e]));
    assert.equal(byName.get('SWITCHYARD_REPLICA_ID')?.valueFrom?.fieldRef?.fieldPath, 'metadata.name');
    assert.equal(byName.get('SWITCHYARD_ADVERTISE_URL')?.value, 'http://$(POD_IP):7070');
    assert.equal(byName.get('SWITCHYARD_ELECTION_BACKEND')?.value, 'kubernetes');
    assert.equal((sts.spec as { replicas: number }).replicas, 3);
    const headless = manifests.find(
      (m) => m.kind === 'Service' && (m.spec as { clusterIP?: string }).clusterIP === 'None',
    );
    assert.ok(headless, 'headless peer Service');
  });
});

// On an IPv6-only cluster, or a dual-stack one whose pods' first address is
// IPv6, status.podIP is an IPv6 address: the listeners must take IPv6
// connections (kubelet probes and peers dial the pod IP), and a URL naming
// the pod IP must write it in brackets, or the app refuses it and exits.
describe('charts: ipFamily IPv6', { skip }, () => {
  const POD_IP = 'fd00:10:244::5';
  const ARGS: Record<string, string[]> = {
    scheduler: [],
    gateway: [],
    runtime: ['--scheduler-url', 'http://[fd00:10:96::10]:7070'],
  };
  /** The config `chart`'s app starts with in a pod rendered with `set`, $(POD_IP) expanded as kubelet does. */
  async function podConfig(chart: string, set: readonly string[], valuesFile?: string) {
    const workload = (await render(chart, valuesFile, set)).find((m) =>
      ['Deployment', 'StatefulSet', 'DaemonSet'].includes(m.kind),
    )!;
    const inherited = Object.entries(process.env).filter(([n]) => !n.startsWith('SWITCHYARD_'));
    // What kubelet gives every pod on an IPv6 cluster (the scheduler's kubernetes backend reads it).
    const env: Record<string, string | undefined> = {
      ...Object.fromEntries(inherited),
      KUBERNETES_SERVICE_HOST: 'fd00:10:96::1',
      KUBERNETES_SERVICE_PORT: '443',
    };
    for (const e of podOf(workload).containers[0]!.env as { name: string; value?: string }[]) {
      if (e.name === 'POD_IP') env.POD_IP = POD_IP;
      else if (e.value !== undefined) env[e.name] = e.value.replaceAll('$(POD_IP)', POD_IP);
    }
    const result = await run(
      process.execPath,
      [join(root, `apps/${chart}/src/main.ts`), ...ARGS[chart]!, '--print-config'],
      { env },
    ).catch((error: { stderr: string }) => assert.fail(`${chart} refused its pod's environment: ${error.stderr}`));
    return parse(result.stdout) as Record<string, unknown> & {
      host?: string;
      advertiseUrl?: string;
      directListen?: { host: string; advertiseUrl?: string };
      health?: { host: string };
    };
  }

  it('scheduler: listens on :: and advertises http://[<pod IP>]:<port>', async () => {
    const config = await podConfig('scheduler', ['ipFamily=IPv6']);
    assert.equal(config.host, '::');
    assert.equal(config.advertiseUrl, `http://[${POD_IP}]:7070`);
  });

  it('gateway: listens on ::', async () => {
    assert.equal((await podConfig('gateway', ['ipFamily=IPv6'])).host, '::');
    assert.equal((await podConfig('gateway', [])).host, '0.0.0.0', 'IPv4 by default');
  });

  it('runtime: serves its direct and health listeners on :: and advertises http://[<pod IP>]:<port>', async () => {
    const config = await podConfig('runtime', ['ipFamily=IPv6'], 'test/charts/values-production-runtime.yaml');
    assert.equal(config.directListen?.host, '::');
    assert.equal(config.directListen?.advertiseUrl, `http://[${POD_IP}]:7080`);
    assert.equal(config.health?.host, '::');
  });

  it('refuses an ipFamily other than IPv4 or IPv6', async () => {
    for (const chart of ['scheduler', 'gateway', 'runtime']) {
      await assert.rejects(render(chart, undefined, ['ipFamily=ipv6']), /ipFamily/, chart);
    }
  });
});

// Scheduler and gateway serving TLS themselves: a kubernetes.io/tls Secret
// mounted read-only, the app pointed at it, probes and scrapes in HTTPS;
// replicas advertise to peers a name the certificate can carry.
type TlsPod = {
  containers: {
    env?: { name: string; value?: string }[];
    volumeMounts?: Record<string, unknown>[];
    livenessProbe: { httpGet: { scheme?: string } };
    readinessProbe: { httpGet: { scheme?: string } };
  }[];
  volumes?: { name: string; secret?: { secretName: string } }[];
};

/** The chart's workload pod, its env by name and its ServiceMonitor endpoint, both validated. */
async function renderedForTls(chart: 'scheduler' | 'gateway', set: readonly string[] = []) {
  const manifests = await render(chart, undefined, ['serviceMonitor.enabled=true', ...set]);
  const workload = manifests.find((m) => m.kind === (chart === 'scheduler' ? 'StatefulSet' : 'Deployment'))!;
  new (chart === 'scheduler' ? StatefulSet : Deployment)(workload as never).validate();
  const monitor = manifests.find((m) => m.kind === 'ServiceMonitor')!;
  new ServiceMonitor(monitor as never).validate();
  const pod = (workload.spec as { template: { spec: TlsPod } }).template.spec;
  const env = new Map((pod.containers[0]!.env ?? []).map((e) => [e.name, e.value]));
  const endpoint = (monitor.spec as { endpoints: Record<string, unknown>[] }).endpoints[0]!;
  return { pod, env, endpoint };
}

for (const chart of ['scheduler', 'gateway'] as const) {
  describe(`charts/${chart}: tls`, { skip }, () => {
    it('serves plain HTTP by default', async () => {
      const { pod, env, endpoint } = await renderedForTls(chart);
      assert.equal(env.has('SWITCHYARD_TLS_CERT_FILE'), false);
      assert.equal(pod.containers[0]!.livenessProbe.httpGet.scheme, 'HTTP');
      assert.equal(
        pod.volumes?.some((v) => v.name === 'tls'),
        false,
      );
      assert.equal(endpoint.scheme, undefined);
      if (chart === 'scheduler') assert.equal(env.get('SWITCHYARD_ADVERTISE_URL'), 'http://$(POD_IP):7070');
    });

    it('mounts the Secret read-only, points the app at it, and probes and scrapes in HTTPS', async () => {
      const extra =
        chart === 'scheduler'
          ? ['trustedCA.existingConfigMap=corp-ca']
          : ['serviceMonitor.tlsConfig.serverName=mcp.example.com'];
      // metricsPort (on by default) takes liveness and scrapes in plain HTTP; see each chart's own test.
      const own = ['metricsPort=null'];
      const { pod, env, endpoint } = await renderedForTls(chart, ['tls.existingSecret=own-tls', ...extra, ...own]);
      const container = pod.containers[0]!;
      assert.equal(env.get('SWITCHYARD_TLS_CERT_FILE'), '/etc/switchyard/tls/tls.crt');
      assert.equal(env.get('SWITCHYARD_TLS_KEY_FILE'), '/etc/switchyard/tls/tls.key');
      assert.deepEqual(
        container.volumeMounts?.find((v) => v.name === 'tls'),
        { name: 'tls', mountPath: '/etc/switchyard/tls', readOnly: true },
      );
      assert.deepEqual(
        pod.volumes?.find((v) => v.name === 'tls'),
        { name: 'tls', secret: { secretName: 'own-tls' } },
      );
      assert.equal(container.livenessProbe.httpGet.scheme, 'HTTPS');
      assert.equal(container.readinessProbe.httpGet.scheme, 'HTTPS');
      assert.equal(endpoint.scheme, 'https');
      if (chart === 'gateway') return assert.deepEqual(endpoint.tlsConfig, { serverName: 'mcp.example.com' });
      const advertised = 'https://$(SWITCHYARD_REPLICA_ID).sy-scheduler-peers.switchyard.svc:7070';
      assert.equal(env.get('SWITCHYARD_ADVERTISE_URL'), advertised);
      const names = (container.env ?? []).map((e) => e.name);
      assert.ok(
        names.indexOf('SWITCHYARD_REPLICA_ID') < names.indexOf('SWITCHYARD_ADVERTISE_URL'),
        'defined before use',
      );
      assert.equal(env.get('NODE_EXTRA_CA_CERTS'), '/etc/switchyard/ca/ca.crt');
      assert.deepEqual(endpoint.tlsConfig, {
        serverName: 'sy-scheduler-0.sy-scheduler-peers.switchyard.svc',
        ca: { configMap: { name: 'corp-ca', key: 'ca.crt' } },
      });
    });
  });
}

describe('runtime chart contracts', { skip }, () => {
  it("sets metering.sink only when given (the runtime's own default otherwise), and refuses an unknown one", async () => {
    const sinkOf = async (set: readonly string[]): Promise<string | undefined> => {
      const deployment = (await render('runtime', undefined, set)).find((m) => m.kind === 'Deployment')!;
      const env = (podOf(deployment).containers[0]!.env ?? []) as { name: string; value?: string }[];
      return env.find((e) => e.name === 'SWITCHYARD_METERING_SINK')?.value;
    };
    assert.equal(await sinkOf([]), undefined);
    assert.equal(await sinkOf(['metering.sink=none']), 'none');
    assert.equal(await sinkOf(['metering.sink=log']), 'log');
    await assert.rejects(sinkOf(['metering.sink=off']), /metering\.sink/);
  });

  const transportOf = async (set: readonly string[] = []): Promise<string | undefined> => {
    const deployment = (await render('runtime', undefined, set)).find((m) => m.kind === 'Deployment')!;
    const env = (podOf(deployment).containers[0]!.env ?? []) as { name: string; value?: string }[];
    return env.find((e) => e.name === 'SWITCHYARD_TUNNEL_TRANSPORT')?.value;
  };

  // stdio servers inherit the runtime's HOME, where npx and uvx keep their caches (~/.npm, ~/.cache). The image's
  // user 10001 has no passwd entry, so without HOME the container runtime gives it /, which the user cannot write
  // (and the root filesystem is read-only): `npx -y <server>` fails with EACCES before the server starts.
  it('gives stdio servers a writable HOME, on a volume of the pod', async () => {
    for (const kind of ['Deployment', 'DaemonSet']) {
      const workload = (await render('runtime', undefined, [`kind=${kind}`])).find((m) => m.kind === kind)!;
      const pod = podOf(workload) as PodSpec & { volumes: { name: string; emptyDir?: unknown }[] };
      const container = pod.containers[0] as unknown as {
        env: { name: string; value?: string }[];
        volumeMounts: { name: string; mountPath: string; readOnly?: boolean }[];
      };
      const home = container.env.find((e) => e.name === 'HOME')?.value ?? '';
      assert.ok(home.startsWith('/'), `HOME is an absolute path: ${home || 'unset'}`);
      const mount = container.volumeMounts.find((m) => home === m.mountPath || home.startsWith(`${m.mountPath}/`));
      assert.ok(mount && !mount.readOnly, `HOME ${home} is on a writable mount`);
      assert.ok(pod.volumes.find((v) => v.name === mount.name)?.emptyDir, `${mount.name} is an emptyDir`);
    }
  });

  it('sets the tunnel transport from tunnelTransport, auto by default, and refuses an unknown one', async () => {
    assert.equal(await transportOf(), 'auto');
    assert.equal(await transportOf(['tunnelTransport=websocket']), 'websocket');
    await assert.rejects(transportOf(['tunnelTransport=quic']), /tunnelTransport/);
  });
});

describe('the install commands of docs/operations.md', () => {
  it('point runtimes and gateways at the Service their scheduler release creates', { skip }, async () => {
    const doc = readFileSync(join(root, 'docs/operations.md'), 'utf8');
    const releases = new Set([...doc.matchAll(/helm install (\S+) charts\/scheduler\b/g)].map((m) => m[1]!));
    // In-cluster URLs name a Service of the namespace (no dot); the others go through an Ingress host.
    const urls = [...doc.matchAll(/(?:schedulerUrl=|schedulers='\{)(https?:\/\/[^}'\s]+)/g)]
      .map((m) => m[1]!)
      .filter((url) => !new URL(url).hostname.includes('.'));
    const valuesOf = (chart: string) => parse(readFileSync(join(root, `charts/${chart}/values.yaml`), 'utf8'));
    const defaults = [...(valuesOf('gateway') as { schedulers: string[] }).schedulers];
    defaults.push((valuesOf('runtime') as { schedulerUrl: string }).schedulerUrl);
    assert.ok(releases.size > 0 && urls.length > 0, 'the page installs a scheduler and points others at it');
    // The chart's own name as the release, or a prefix of it: both give the Service the defaults name.
    for (const release of [...releases, 'switchyard']) {
      const manifests = parseAllDocuments(await helmRun(['template', release, 'charts/scheduler']))
        .map((d) => d.toJSON() as Manifest | null)
        .filter((m): m is Manifest => m?.kind === 'Service');
      const services = manifests.map((m) => m.metadata.name);
      for (const url of [...urls, ...defaults]) {
        assert.ok(
          services.includes(new URL(url).hostname),
          `${url} names a Service of release ${release}: ${services}`,
        );
      }
    }
  });
});

// An MCP client that sets no header (most do not) gets the gateway's default
// class: with every chart at its defaults, as the install commands of
// operations.md leave them, the runtimes must serve it, or every such client
// gets 503 "no runtime serves class …".
describe('the default values of the gateway and runtime charts', { skip }, () => {
  it('send a request that names no class to a class the runtimes serve; defaultClass moves it', async () => {
    const gatewayEnv = async (set: readonly string[] = []): Promise<string | undefined> => {
      const deployment = (await render('gateway', undefined, set)).find((m) => m.kind === 'Deployment')!;
      const env = (podOf(deployment).containers[0]!.env ?? []) as { name: string; value?: string }[];
      return env.find((e) => e.name === 'SWITCHYARD_DEFAULT_CLASS')?.value;
    };
    // The gateway's own default when the chart sets nothing.
    const { stdout } = await run(process.execPath, [
      join(root, 'apps/gateway/src/main.ts'),
      ...['--schedulers', 'http://127.0.0.1:1', '--print-config'],
    ]);
    const appDefault = /^defaultClass: (\S+)$/m.exec(stdout)![1]!;
    const defaultClass = (await gatewayEnv()) ?? appDefault;
    const configMap = (await render('runtime')).find((m) => m.kind === 'ConfigMap')!;
    const runtimeConfig = parse(Object.values(configMap.data as Record<string, string>)[0]!) as {
      classes: Record<string, unknown>;
    };
    assert.ok(
      Object.hasOwn(runtimeConfig.classes, defaultClass),
      `gateway default class ${defaultClass}, runtime classes ${Object.keys(runtimeConfig.classes)}`,
    );
    assert.equal(await gatewayEnv(['defaultClass=gpu']), 'gpu');
    await assert.rejects(gatewayEnv(['defaultClass=two words']), /defaultClass/);
  });
});

// The runtime reads its --config file once, at start: a change to anything
// the chart writes there must roll the pods, or it takes effect only when
// they happen to restart.
describe('charts/runtime: config file changes roll the pods', { skip }, () => {
  const annotationsOf = async (set: readonly string[]): Promise<Record<string, string>> => {
    const workload = (await render('runtime', undefined, set)).find((m) => m.kind === 'Deployment')!;
    return (workload.spec as { template: { metadata: { annotations: Record<string, string> } } }).template.metadata
      .annotations;
  };

  for (const set of [['sandboxesMax=200'], ['metadata.zone=eu-west-1a'], ['classes.other.engine=builtin']]) {
    it(`changes the pod template with ${set.join(' ')}`, async () => {
      assert.notDeepEqual(await annotationsOf(set), await annotationsOf([]));
    });
  }
});

// Schedulers read their token files again when kubelet updates them (operations.md: "nothing restarts"):
// rotating tokens through values changes the Secret, not the pod template, so no replica restarts.
describe('charts/scheduler: token rotation through values restarts nothing', { skip }, () => {
  const rendered = async (set: readonly string[]) => {
    const manifests = await render('scheduler', undefined, set);
    const pods = (manifests.find((m) => m.kind === 'StatefulSet')!.spec as { template: unknown }).template;
    const secrets = manifests.filter((m) => m.kind === 'Secret');
    return { pods, secrets };
  };
  const first = ['joinTokens.values={join-token-one-0123456789}', 'apiTokens.values={api-token-one-0123456789}'];
  const second = [
    'joinTokens.values={join-token-one-0123456789,join-token-two-0123456789}',
    'apiTokens.values={api-token-one-0123456789,api-token-two-0123456789}',
  ];

  it('changes the Secrets and leaves the pod template as it was', async () => {
    const [before, after] = [await rendered(first), await rendered(second)];
    assert.notDeepEqual(after.secrets, before.secrets, 'the new tokens are in the Secrets');
    assert.deepEqual(after.pods, before.pods);
  });
});

/**
 * The variables kubelet puts in every pod of a namespace for each of its
 * Services with a cluster IP (Docker-link style, pkg/kubelet/envvars), unless
 * the pod sets `enableServiceLinks: false`: `<NAME>_SERVICE_HOST`,
 * `<NAME>_PORT_<port>_TCP_ADDR` and the like, `<NAME>` the Service's name in
 * upper snake case.
 */
function serviceLinkEnv(service: Manifest): Record<string, string> {
  const spec = service.spec as { clusterIP?: string; ports: { name?: string; port: number; protocol?: string }[] };
  if (spec.clusterIP === 'None') return {};
  const name = service.metadata.name.toUpperCase().replaceAll('-', '_');
  const ip = '10.96.0.10';
  const env: Record<string, string> = {
    [`${name}_SERVICE_HOST`]: ip,
    [`${name}_SERVICE_PORT`]: String(spec.ports[0]!.port),
  };
  spec.ports.forEach((p, i) => {
    const proto = (p.protocol ?? 'TCP').toLowerCase();
    const prefix = `${name}_PORT_${p.port}_${proto.toUpperCase()}`;
    if (p.name) env[`${name}_SERVICE_PORT_${p.name.toUpperCase().replaceAll('-', '_')}`] = String(p.port);
    if (i === 0) env[`${name}_PORT`] = `${proto}://${ip}:${p.port}`;
    Object.assign(env, {
      [prefix]: `${proto}://${ip}:${p.port}`,
      [`${prefix}_PROTO`]: proto,
      [`${prefix}_PORT`]: String(p.port),
      [`${prefix}_ADDR`]: ip,
    });
  });
  return env;
}

// Installed as docs/operations.md says, the Services are named
// switchyard-scheduler and switchyard-gateway, so kubelet hands every pod of
// the namespace SWITCHYARD_SCHEDULER_SERVICE_HOST and friends; the apps take
// an unknown SWITCHYARD_* name for a typo and refuse to start.
describe('charts: pods start beside the Services of the three releases', { skip }, () => {
  const releases = { scheduler: 'switchyard-scheduler', gateway: 'switchyard-gateway', runtime: 'switchyard-runtime' };
  const ARGS: Record<string, string[]> = {
    scheduler: [],
    gateway: ['--schedulers', 'http://127.0.0.1:1'],
    runtime: ['--scheduler-url', 'http://127.0.0.1:1'],
  };
  for (const [chart, release] of Object.entries(releases)) {
    it(`${chart}: its app reads the environment kubelet gives its pods`, async () => {
      const rendered = await Promise.all(
        Object.entries(releases).map(async ([c, r]) =>
          parseAllDocuments(await helmRun(['template', r, `charts/${c}`, '--namespace', 'switchyard']))
            .map((d) => d.toJSON() as Manifest | null)
            .filter((m): m is Manifest => m !== null),
        ),
      );
      const links = Object.assign(
        {},
        ...rendered
          .flat()
          .filter((m) => m.kind === 'Service')
          .map(serviceLinkEnv),
      ) as Record<string, string>;
      assert.ok(
        Object.keys(links).some((n) => n.startsWith('SWITCHYARD_')),
        Object.keys(links).join(','),
      );
      const own = rendered[Object.keys(releases).indexOf(chart)]!;
      const workload = own.find((m) => ['Deployment', 'StatefulSet', 'DaemonSet'].includes(m.kind))!;
      assert.ok(workload, `${release} has a workload`);
      const pod = podOf(workload) as PodSpec & { enableServiceLinks?: boolean };
      const injected = pod.enableServiceLinks === false ? {} : links;
      const env = Object.fromEntries(Object.entries(process.env).filter(([n]) => !n.startsWith('SWITCHYARD_')));
      const result = await run(
        process.execPath,
        [join(root, `apps/${chart}/src/main.ts`), ...ARGS[chart]!, '--print-config'],
        { env: { ...env, ...injected } },
      ).catch((error: { code: number; stderr: string }) => error);
      assert.ok(
        !('code' in result) || result.code === 0,
        `${chart} refused its pod's environment: ${'stderr' in result ? result.stderr : ''}`,
      );
    });
  }
});

// docs/operations.md: grace must exceed the drain delay plus the 30 s bound
// on in-flight work; kubelet kills the pod at the end of its grace, mid-drain.
describe('charts: termination grace and drain delay', { skip }, () => {
  for (const c of CHARTS) {
    it(`${c.chart}: refuses a grace period the drain does not fit in`, async () => {
      const grace = async (set: readonly string[]) => {
        const workload = (await render(c.chart, undefined, set)).find((m) => m.kind === c.workload)!;
        return (podOf(workload) as PodSpec & { terminationGracePeriodSeconds: number }).terminationGracePeriodSeconds;
      };
      assert.ok((await grace([])) > 0);
      await assert.rejects(
        grace(['drainDelayMs=60000']),
        /terminationGracePeriodSeconds \(\d+\) must exceed drainDelayMs \(60000 ms\) plus 30 s .* at least 91/,
      );
      await assert.rejects(grace(['drainDelayMs=60000', 'terminationGracePeriodSeconds=90']), /at least 91/);
      assert.equal(await grace(['drainDelayMs=60000', 'terminationGracePeriodSeconds=91']), 91);
    });
  }
});
