// Scheduler replicas and gateways spread over nodes by default: all three
// replicas on one node would lose the leader and its followers together.
// Rendered with the real helm binary; the constraints must select the pods
// the workload itself runs, or the spread would count nothing.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { chartRenderer, type Manifest } from './helm.ts';

const { skip, render } = chartRenderer('chart spread tests');

const WORKLOADS = { scheduler: 'StatefulSet', gateway: 'Deployment' } as const;
type Chart = keyof typeof WORKLOADS;

interface Pod {
  metadata: { labels: Record<string, string> };
  spec: { topologySpreadConstraints?: Array<Record<string, unknown>> };
}

async function podOf(chart: Chart, set: readonly string[] = []): Promise<Pod> {
  const manifests: Manifest[] = await render(chart, undefined, set);
  const workload = manifests.find((m) => m.kind === WORKLOADS[chart]);
  assert.ok(workload, `no ${WORKLOADS[chart]} rendered`);
  return (workload.spec as { template: Pod }).template;
}

for (const chart of Object.keys(WORKLOADS) as Chart[]) {
  describe(`charts/${chart}: spread over nodes`, { skip }, () => {
    it('spreads its pods over hostnames by default, softly, selecting its own pods', async () => {
      const pod = await podOf(chart);
      const [spread, ...others] = pod.spec.topologySpreadConstraints ?? [];
      assert.deepEqual(others, []);
      assert.ok(spread, 'no topologySpreadConstraints');
      assert.equal(spread.topologyKey, 'kubernetes.io/hostname');
      assert.equal(spread.whenUnsatisfiable, 'ScheduleAnyway');
      assert.equal(spread.maxSkew, 1);
      const { matchLabels } = spread.labelSelector as { matchLabels: Record<string, string> };
      assert.ok(Object.keys(matchLabels).length > 0, 'an empty selector');
      for (const [key, value] of Object.entries(matchLabels)) assert.equal(pod.metadata.labels[key], value, key);
    });

    it('renders none with spreadOverNodes false', async () => {
      const pod = await podOf(chart, ['spreadOverNodes=false']);
      assert.equal(pod.spec.topologySpreadConstraints, undefined);
    });

    it('renders the constraints given in place of its own', async () => {
      const pod = await podOf(chart, [
        'topologySpreadConstraints[0].maxSkew=2',
        'topologySpreadConstraints[0].topologyKey=topology.kubernetes.io/zone',
        'topologySpreadConstraints[0].whenUnsatisfiable=DoNotSchedule',
      ]);
      assert.deepEqual(pod.spec.topologySpreadConstraints, [
        { maxSkew: 2, topologyKey: 'topology.kubernetes.io/zone', whenUnsatisfiable: 'DoNotSchedule' },
      ]);
    });

    it('refuses a spreadOverNodes that is not a boolean', async () => {
      await assert.rejects(render(chart, undefined, ['spreadOverNodes=sometimes']), /spreadOverNodes/);
    });
  });
}
