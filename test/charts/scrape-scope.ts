// What the charts' monitoring (the PrometheusRule alerts, the Grafana
// dashboards) may read: the metrics the table of docs/operations.md lists
// (test/docs/metrics.test.ts holds that table to what the apps export), and
// the matcher that holds a query to one release's series.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { root, type Manifest } from './helm.ts';

/** The metrics the table of docs/operations.md lists, with their type (counter, gauge, histogram). */
export const documentedMetrics: ReadonlyMap<string, string> = new Map(
  [
    ...readFileSync(join(root, 'docs/operations.md'), 'utf8').matchAll(/^\| `(switchyard_[a-z0-9_]+)` +\| (\w+) +\|/gm),
  ].map((m) => [m[1]!, m[2]!]),
);

type Monitor = Manifest & { spec: { selector: { matchLabels: Record<string, string> } } };
type Labelled = Manifest & { metadata: { labels?: Record<string, string> } };

/**
 * The matcher that holds a query to the series of the release rendered in `namespace`, from the labels the
 * Prometheus Operator gives the targets of the chart's own monitor: a ServiceMonitor's get `service`, the name of
 * the Service they were found through (it must select exactly one, or the label would not tell this release's
 * pods from others'); a PodMonitor's get `job`, `<namespace>/<PodMonitor name>` (no jobLabel is set).
 */
export function releaseMatcher(manifests: Manifest[], namespace: string): string {
  const monitors = manifests.filter((m): m is Monitor => m.kind === 'ServiceMonitor' || m.kind === 'PodMonitor');
  assert.equal(monitors.length, 1, 'one monitor rendered');
  const monitor = monitors[0]!;
  if (monitor.kind === 'PodMonitor') return `job="${namespace}/${monitor.metadata.name}"`;
  const wanted = Object.entries(monitor.spec.selector.matchLabels);
  const services = manifests.filter(
    (m): m is Labelled => m.kind === 'Service' && wanted.every(([k, v]) => (m as Labelled).metadata.labels?.[k] === v),
  );
  const names = services.map((s) => s.metadata.name);
  assert.equal(names.length, 1, `the ServiceMonitor selects ${names.join(', ') || 'no Service'}`);
  return `service="${names[0]}"`;
}

/**
 * What kube-state-metrics calls the desired replicas of each kind of workload the charts render that can be
 * scaled to 0, and the label naming the workload: a DaemonSet has no replica count.
 */
const DESIRED_REPLICAS: Readonly<Record<string, { metric: string; label: string }>> = {
  Deployment: { metric: 'kube_deployment_spec_replicas', label: 'deployment' },
  StatefulSet: { metric: 'kube_statefulset_replicas', label: 'statefulset' },
};

/** The metrics of kube-state-metrics the alerts may read beside the documented ones. */
export const kubeStateMetrics: ReadonlySet<string> = new Set(Object.values(DESIRED_REPLICAS).map((d) => d.metric));

/**
 * The selector of kube-state-metrics' desired replicas of the one workload rendered in `namespace` (its metric and
 * matchers as written), or undefined for a DaemonSet.
 */
export function desiredReplicasOf(
  manifests: Manifest[],
  namespace: string,
): { metric: string; matchers: string[] } | undefined {
  const workloads = manifests.filter((m) => ['Deployment', 'StatefulSet', 'DaemonSet'].includes(m.kind));
  assert.equal(workloads.length, 1, `one workload rendered: ${workloads.map((w) => w.kind).join(', ')}`);
  const workload = workloads[0]!;
  const desired = DESIRED_REPLICAS[workload.kind];
  if (!desired) return undefined;
  return {
    metric: desired.metric,
    matchers: [`namespace="${namespace}"`, `${desired.label}="${workload.metadata.name}"`],
  };
}
