// Every chart's basics, rendered with the real helm binary: helm lint, the
// values schema refusing what Kubernetes would drop without a word, each
// manifest valid against the Kubernetes API schemas (kubernetes-models), the
// security and probe contracts operators rely on, env names the app reads,
// and a termination grace the drain fits in.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { compileCacheEnv } from '../support/processes.ts';
import { chartRenderer } from './helm.ts';
import { assertEnvNamesRead, podOf, type PodSpec } from './manifests.ts';
import { assertValidObjects } from './models.ts';

// The apps these tests start take this process's environment: through Node's
// compile cache, all but the first load without the type stripper.
for (const [name, value] of Object.entries(compileCacheEnv())) process.env[name] ??= value;
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
