// The gateway chart's values, rendered with the real helm binary: client
// authentication (auth.*), what each mode needs and what it refuses;
// replicas and the HPA; its PodDisruptionBudget; the memory settings; and the
// trusted proxies as the gateway itself reads them (--print-config).
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { Deployment } from 'kubernetes-models/apps/v1';
import { PodDisruptionBudget } from 'kubernetes-models/policy/v1';
import { HorizontalPodAutoscaler } from 'kubernetes-models/autoscaling/v2';
import { compileCacheEnv } from '../support/processes.ts';
import { chartRenderer, type Manifest } from './helm.ts';
import { podOf } from './manifests.ts';

const root = join(import.meta.dirname, '../..');
// The apps these tests start take this process's environment: through Node's
// compile cache, all but the first load without the type stripper.
for (const [name, value] of Object.entries(compileCacheEnv())) process.env[name] ??= value;
const run = promisify(execFile);
const { skip, render } = chartRenderer('gateway values chart tests');

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

  it('refuses tool scopes outside jwt mode, where no token has scopes to check', async () => {
    await assert.rejects(
      envOf(['auth.mode=bearer', 'auth.existingSecret=mcp-tokens', 'auth.toolScopes.delete_repo={repo:admin}']),
      /auth\.toolScopes needs auth\.mode jwt/,
    );
  });

  it('hands the gateway tool scopes as JSON, and none when unset', async () => {
    const jwtSet = ['auth.mode=jwt', 'auth.jwksUrl=https://login.example.com/jwks'];
    const scoped = await envOf([...jwtSet, 'auth.toolScopes.delete_repo={repo:admin,org:admin}']);
    assert.deepEqual(JSON.parse(scoped.get('SWITCHYARD_AUTH_TOOL_SCOPES')!), {
      delete_repo: ['repo:admin', 'org:admin'],
    });
    assert.equal((await envOf(jwtSet)).has('SWITCHYARD_AUTH_TOOL_SCOPES'), false, 'unset: none');
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

  // The model validation of charts.test.ts can fail: the same rendered Deployment, broken in one field, is refused.
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
