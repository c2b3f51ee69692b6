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
