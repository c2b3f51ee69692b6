// The scheduler chart, rendered with the real helm binary: its
// NetworkPolicy admitting the pods of all three charts, its Role on leases,
// its PodDisruptionBudget, and how replicas name themselves and elect.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { PodDisruptionBudget } from 'kubernetes-models/policy/v1';
import { chartRenderer } from './helm.ts';
import { podOf } from './manifests.ts';

const { skip, render } = chartRenderer('scheduler chart tests');

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
