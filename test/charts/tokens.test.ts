// The tokens the charts hand the apps, rendered with the real helm binary:
// files mounted from Secrets (never env vars), the scheduler's API and peer
// tokens made from values or mounted from an existing Secret, rotating them
// through values restarting no replica, and direct mode (the runtime's
// listener, its port, cap and advertised pod IP, and the token the runtime
// and gateway both read from a Secret).
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { chartRenderer, type Manifest } from './helm.ts';
import { podOf, secretFileOf, type SecretPod } from './manifests.ts';

const { skip, render } = chartRenderer('chart token tests');

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

  it('runtime: refuses a join token too short for any scheduler to take', async () => {
    // A scheduler refuses tokens under 16 characters: a runtime given one would dial in vain for ever.
    await assert.rejects(render('runtime', undefined, ['joinToken.value=short']), /joinToken\.value/);
    await render('runtime', undefined, ['joinToken.value=0123456789abcdef']);
  });

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
