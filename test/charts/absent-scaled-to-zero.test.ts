// The absent() alerts of the charts' PrometheusRules (the scheduler's
// noLeader, the gateway's and the runtime's absent) and a release scaled to 0
// on purpose, whose pods are all gone as when they all crashed. Scaled outside
// the chart (kubectl scale), the alert holds its peace while kube-state-metrics
// reports the workload's desired replicas as 0: the expression ends in
// `unless on() <desired replicas of the release's workload> == 0`, which drops
// nothing when that series is missing (no kube-state-metrics), so the alert
// then fires as before. Scaled to 0 in the chart (the runtime's replicas: 0;
// the gateway's and the scheduler's schemas take no 0), the alert is not
// rendered. Rendered with the real helm binary.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { chartRenderer, type Manifest } from './helm.ts';
import { absentsOf, outermostBinary, selectorsOf } from './promql.ts';
import { desiredReplicasOf } from './scrape-scope.ts';

const { skip, render } = chartRenderer('chart absent() scaled-to-0 tests');

type Rule = { alert: string; expr: string };
type RuleManifest = Manifest & { spec: { groups: { rules: Rule[] }[] } };

const CHARTS = [
  { chart: 'scheduler', alert: 'SwitchyardSchedulerNoLeader', monitor: 'serviceMonitor.enabled=true' },
  { chart: 'gateway', alert: 'SwitchyardGatewayAbsent', monitor: 'serviceMonitor.enabled=true' },
  { chart: 'runtime', alert: 'SwitchyardRuntimeAbsent', monitor: 'podMonitor.enabled=true' },
] as const;

/** The manifests of release blue in namespace edge, its rules on, and the alert named, if rendered. */
async function renderedAlert(chart: string, monitor: string, alert: string, set: readonly string[] = []) {
  const on = ['prometheusRule.enabled=true', monitor, ...set];
  const manifests = await render(chart, undefined, on, { release: 'blue', namespace: 'edge' });
  const rules = manifests
    .filter((m): m is RuleManifest => m.kind === 'PrometheusRule')
    .flatMap((m) => m.spec.groups.flatMap((g) => g.rules));
  return { manifests, rule: rules.find((r) => r.alert === alert) };
}

for (const { chart, alert, monitor } of CHARTS) {
  describe(`charts/${chart}: ${alert} and a release scaled to 0`, { skip }, () => {
    it("holds its peace while kube-state-metrics says the release's workload wants 0 replicas, fires without it", async () => {
      const { manifests, rule } = await renderedAlert(chart, monitor, alert);
      assert.ok(rule, `${alert} rendered`);
      const desired = desiredReplicasOf(manifests, 'edge');
      assert.ok(desired, `${chart} renders a workload with a replica count`);
      // `a unless on() b`: a's samples, none of them once b has any; all of them while b has none.
      const guarded = outermostBinary(rule.expr);
      assert.deepEqual([guarded?.operator, guarded?.on], ['unless', []], rule.expr);
      assert.ok(absentsOf(guarded!.left).length > 0, `${rule.expr}: absent() is what it guards`);
      const zero = outermostBinary(guarded!.right);
      assert.deepEqual([zero?.operator, zero?.right], ['==', '0'], rule.expr);
      assert.deepEqual(selectorsOf(zero!.left), [desired], `${rule.expr}: the release's own workload`);
    });
  });
}

describe('charts/runtime: SwitchyardRuntimeAbsent and replicas 0', { skip }, () => {
  const monitor = 'podMonitor.enabled=true';
  const alert = 'SwitchyardRuntimeAbsent';

  it('leaves the alert out of a Deployment of 0 replicas, and its for unchecked', async () => {
    assert.equal((await renderedAlert('runtime', monitor, alert, ['replicas=0'])).rule, undefined);
    // A for under twice the interval is refused only for an alert rendered (absent-for.test.ts).
    const short = ['prometheusRule.alerts.absent.for=1m', 'podMonitor.interval=45s'];
    assert.equal((await renderedAlert('runtime', monitor, alert, ['replicas=0', ...short])).rule, undefined);
    assert.ok((await renderedAlert('runtime', monitor, alert, ['replicas=1'])).rule);
  });

  it('keeps it for a DaemonSet, which has no replica count, unguarded: one on no node is down', async () => {
    const { manifests, rule } = await renderedAlert('runtime', monitor, alert, ['kind=DaemonSet', 'replicas=0']);
    assert.equal(desiredReplicasOf(manifests, 'edge'), undefined);
    assert.ok(rule, `${alert} rendered`);
    assert.equal(outermostBinary(rule.expr), null, rule.expr);
  });
});
