// The charts' PrometheusRules (prometheusRule.enabled), rendered with the real
// helm binary: one object of the Prometheus Operator's schema, whose alerts
// each say what they mean, with a severity and a `for`; every expression is
// PromQL by the Prometheus project's own grammar (lezer-promql), on metrics
// the table of docs/operations.md lists (test/docs/metrics.test.ts holds that
// table to what the apps export), on the release's own series only: by the
// labels its own ServiceMonitor or PodMonitor gives them, so that two
// releases of a chart in one namespace are watched apart (kube-state-metrics'
// desired replicas of the release's own workload aside, by its namespace and
// name: see absent-scaled-to-zero.test.ts); and each chart has an alert that
// fires once Prometheus scrapes no process of the release at all (absent()),
// when every expression on their values returns nothing.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { PrometheusRule } from '@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1';
import { parse } from 'yaml';
import { chartRenderer, root, type Manifest } from './helm.ts';
import { absentsOf, aggregationsOf, equalities, resultLabels, selectorsOf } from './promql.ts';
import { desiredReplicasOf, documentedMetrics, kubeStateMetrics, releaseMatcher } from './scrape-scope.ts';

const { skip, render } = chartRenderer('chart PrometheusRule tests');

type Rule = {
  alert: string;
  expr: string;
  for: string;
  labels: Record<string, string>;
  annotations: Record<string, string>;
};
type RuleManifest = Manifest & { metadata: { labels: Record<string, string> }; spec: { groups: { rules: Rule[] }[] } };

const operations = readFileSync(join(root, 'docs/operations.md'), 'utf8');
/** The metrics the table of docs/operations.md lists. */
const documented = new Set(documentedMetrics.keys());
/** The rows of its Alerts table: alert → its entry under prometheusRule.alerts. */
const alertRows = new Map(
  [...operations.matchAll(/^\| `(Switchyard[A-Za-z]+)` +\| `([A-Za-z]+)` +\|/gm)].map((m) => [m[1]!, m[2]!]),
);

const rulesOf = (manifests: Manifest[]): RuleManifest[] =>
  manifests.filter((m): m is RuleManifest => m.kind === 'PrometheusRule');
const capitalized = (s: string): string => s[0]!.toUpperCase() + s.slice(1);

it('the expression check refuses broken PromQL and reads metric names (its passing below means something)', () => {
  assert.ok(documented.size >= 20, `${documented.size} metrics in the table`);
  for (const broken of ['sum(rate(x[5m])', 'a > > 1', 'x{namespace="a"']) {
    assert.throws(() => selectorsOf(broken), /PromQL syntax error/, broken);
  }
  assert.deepEqual(selectorsOf('sum(rate(a_total{namespace="n",code=~"5.."}[5m])) / sum(b) > 0.05'), [
    { metric: 'a_total', matchers: ['namespace="n"', 'code=~"5.."'] },
    { metric: 'b', matchers: [] },
  ]);
  // Prometheus' own examples of the labels of absent()'s result.
  assert.deepEqual(absentsOf('absent(x{job="a",instance=~".*"}) or absent(sum(x{job="a"}))'), [
    { metric: 'x', labels: { job: 'a' } },
    { metric: '', labels: {} },
  ]);
  assert.deepEqual(aggregationsOf('sum by (a, b) (x) < 1 or max(y) or min without (c) (z)'), [
    { op: 'sum', by: ['a', 'b'] },
    { op: 'max' },
    { op: 'min', without: ['c'] },
  ]);
  // The labels an alert fired from the expression carries, by Prometheus' rules for each operator.
  const kept = (expr: string) => [...(resultLabels(expr) ?? [])].toSorted();
  assert.deepEqual(kept('sum(x{a="1",b="2"}) > 1'), []);
  assert.deepEqual(kept('max by (a, c) (x{a="1",b="2"}) < 1'), ['a']);
  assert.deepEqual(kept('max without (b) (x{a="1",b="2",c=""}) < 1'), ['a']);
  assert.deepEqual(kept('sum by (a, b) (rate(x{a="1",b="2"}[5m])) / sum by (a, b) (rate(y{a="1",b="2"}[5m])) > 0.1'), [
    'a',
    'b',
  ]);
  assert.deepEqual(kept('sum by (a, b) (x{a="1",b="2"}) / on (a) sum by (a, b) (y{a="1",b="2"})'), ['a']);
  assert.deepEqual(kept('x{a="1",b="2"} / ignoring (b) y{a="1",b="2"}'), ['a']);
  assert.deepEqual(kept('sum by (a, b) (x{a="1",b="2"}) < 1 or absent(x{a="1",b="2",c=~".*"})'), ['a', 'b']);
  assert.deepEqual(kept('sum by (a, b) (x{a="1",b="2"}) < 1 or absent(sum(x{a="1",b="2"}))'), []);
});

/**
 * Per chart: a key of prometheusRule.alerts whose threshold the tuning test sets, and a threshold it may take;
 * what turns its monitor on; the values under which its monitor scrapes a Service of another name; and the
 * features every alert of values.yaml watches (the gateway's Redis alert is rendered only with a Redis: see
 * gateway-redis-alert.test.ts).
 */
const CHARTS = [
  {
    chart: 'scheduler',
    tuned: 'epochLag',
    threshold: 30,
    monitor: 'serviceMonitor.enabled=true',
    scrapes: [[], ['metricsPort=null']],
    features: [],
  },
  {
    chart: 'gateway',
    tuned: 'upstreamErrors',
    threshold: 0.2,
    monitor: 'serviceMonitor.enabled=true',
    scrapes: [[], ['metricsPort=null']],
    features: ['redis.existingSecret=switchyard-redis'],
  },
  {
    chart: 'runtime',
    tuned: 'connectionsHigh',
    threshold: 0.5,
    monitor: 'podMonitor.enabled=true',
    scrapes: [[]],
    features: [],
  },
] as const;

for (const { chart, tuned, threshold, monitor, scrapes, features } of CHARTS) {
  describe(`charts/${chart}: prometheusRule`, { skip }, () => {
    const values = parse(readFileSync(join(root, `charts/${chart}/values.yaml`), 'utf8')) as {
      prometheusRule?: { alerts?: Record<string, unknown> };
    };
    const keys = Object.keys(values.prometheusRule?.alerts ?? {});
    const on = ['prometheusRule.enabled=true', 'prometheusRule.labels.release=prometheus', monitor, ...features];
    const rendered = async (set: readonly string[] = []): Promise<Rule[]> => {
      const rules = rulesOf(await render(chart, undefined, [...on, ...set]));
      assert.equal(rules.length, 1);
      return rules[0]!.spec.groups.flatMap((g) => g.rules);
    };

    it('renders none by default', async () => {
      assert.equal(rulesOf(await render(chart)).length, 0);
    });

    it('renders one valid PrometheusRule, with the labels given, alerting as prometheusRule.alerts lists', async () => {
      assert.ok(keys.length >= 3, `alerts in values.yaml: ${keys.join(', ')}`);
      const rules = rulesOf(await render(chart, undefined, on));
      assert.equal(rules.length, 1);
      assert.doesNotThrow(() => new PrometheusRule(rules[0] as never).validate());
      assert.equal(rules[0]!.metadata.labels.release, 'prometheus');
      assert.equal(rules[0]!.metadata.labels['app.kubernetes.io/part-of'], 'switchyard');
      const alerts = rules[0]!.spec.groups.flatMap((g) => g.rules.map((r) => r.alert));
      assert.deepEqual(
        alerts,
        keys.map((k) => `Switchyard${capitalized(chart)}${capitalized(k)}`),
      );
    });

    it('has each alert listed in the Alerts table of docs/operations.md, under its entry', () => {
      const prefix = `Switchyard${capitalized(chart)}`;
      const listed = [...alertRows].filter(([alert]) => alert.startsWith(prefix));
      assert.deepEqual(
        listed,
        keys.map((k) => [`${prefix}${capitalized(k)}`, k]),
      );
    });

    it('gives each alert a severity, a for, and a summary and description of what it means and what to check', async () => {
      for (const rule of await rendered()) {
        assert.match(rule.labels.severity ?? '', /^(critical|warning)$/, rule.alert);
        assert.match(rule.for, /^[1-9][0-9]*m$/, rule.alert);
        assert.ok((rule.annotations.summary?.length ?? 0) > 10, `${rule.alert}: summary`);
        assert.ok((rule.annotations.description?.length ?? 0) > 80, `${rule.alert}: description`);
      }
    });

    it('writes each expression in PromQL, on documented metrics', async () => {
      for (const rule of await rendered()) {
        const selectors = selectorsOf(rule.expr);
        assert.ok(selectors.length > 0, rule.alert);
        for (const { metric } of selectors) {
          assert.ok(
            documented.has(metric) || kubeStateMetrics.has(metric),
            `${rule.alert}: ${metric || 'a selector without a name'} is not in the table`,
          );
        }
      }
    });

    /** The rules and the manifests of release `release` in `namespace`, its monitor on. */
    const releaseRules = async (release: string, namespace: string, set: readonly string[] = []) => {
      const manifests = await render(chart, undefined, [...on, ...set], { release, namespace });
      const rules = rulesOf(manifests)[0]!.spec.groups.flatMap((g) => g.rules);
      return { manifests, rules };
    };

    it("holds every selector to the release's own series: its namespace, and the label its monitor gives them", async () => {
      for (const set of scrapes) {
        const { manifests, rules } = await releaseRules('blue', 'edge', set);
        const own = releaseMatcher(manifests, 'edge');
        assert.ok(own.includes('blue'), `${own} follows the release name`);
        const workload = desiredReplicasOf(manifests, 'edge');
        for (const rule of rules) {
          for (const { metric, matchers } of selectorsOf(rule.expr)) {
            const where = `${rule.alert} (${set.join(' ') || 'defaults'}): ${metric} {${matchers.join(',')}}`;
            // kube-state-metrics' series are about the release's objects, not scraped from its pods.
            if (kubeStateMetrics.has(metric)) {
              assert.deepEqual({ metric, matchers }, workload, where);
              continue;
            }
            assert.ok(matchers.includes('namespace="edge"'), where);
            assert.ok(matchers.includes(own), `${where} lacks ${own}`);
          }
        }
      }
    });

    it('alerts when no process of the release is scraped at all: absent() over its series, labelled as the release', async () => {
      // Once every process is gone (crash loop, pods deleted, nothing scraped), their series go stale and an
      // expression on them returns nothing, so no alert on their values fires: only absent() does.
      for (const set of scrapes) {
        const { manifests, rules } = await releaseRules('blue', 'edge', set);
        const own = [...equalities([releaseMatcher(manifests, 'edge')])][0]!;
        const scope = { namespace: 'edge', [own[0]]: own[1] };
        const watching = rules.filter((r) => absentsOf(r.expr).length > 0);
        assert.ok(
          watching.length > 0,
          `${chart} (${set.join(' ') || 'defaults'}): no alert fires once its series are gone`,
        );
        for (const rule of watching) {
          for (const { metric, labels } of absentsOf(rule.expr)) {
            assert.deepEqual(labels, scope, `${rule.alert}: the labels of absent(${metric || '…'})`);
          }
          // Its other branches keep the same labels: the alert stays one as the last process goes or the first returns.
          for (const { by } of aggregationsOf(rule.expr)) {
            assert.deepEqual(by?.toSorted(), Object.keys(scope).toSorted(), `${rule.alert}: what it aggregates by`);
          }
        }
      }
    });

    it("gives every alert the release's namespace and service or job, for routing: aggregations are by them", async () => {
      // Alertmanager routes by labels (most by namespace): an alert that fired without them reaches no team's
      // receiver, and two releases' would read alike. By, not without: without keeps pod, instance and the
      // other target labels, so sum(is_leader) would split into one 1 per replica, never above 1.
      for (const set of scrapes) {
        const { manifests, rules } = await releaseRules('blue', 'edge', set);
        const scope = ['namespace', ...equalities([releaseMatcher(manifests, 'edge')]).keys()];
        for (const rule of rules) {
          const where = `${rule.alert} (${set.join(' ') || 'defaults'}): ${rule.expr}`;
          // Beyond the scope, an aggregation keeps only the labels its alert shows ($labels.class): one fault,
          // one alert.
          const shown = [...JSON.stringify(rule.annotations).matchAll(/\$labels\.([a-z_]+)/g)].map((m) => m[1]!);
          const wanted = [...new Set([...scope, ...shown])].toSorted();
          for (const aggregation of aggregationsOf(rule.expr)) {
            assert.deepEqual(aggregation.by?.toSorted(), wanted, `${where}: ${JSON.stringify(aggregation)}`);
          }
          // What it fires from keeps them: a binary operation between two aggregations too, which drops them
          // when it matches on() fewer labels or ignoring() one of them.
          const kept = resultLabels(rule.expr) ?? new Set();
          assert.deepEqual(
            scope.filter((label) => !kept.has(label)),
            [],
            `${where}: the labels it fires without`,
          );
        }
      }
    });

    it('watches two releases in one namespace apart (staging beside production)', async () => {
      const staging = (await releaseRules('staging', 'shop')).rules;
      const production = (await releaseRules('production', 'shop')).rules;
      assert.equal(staging.length, production.length);
      staging.forEach((rule, i) => {
        const theirs = selectorsOf(production[i]!.expr);
        selectorsOf(rule.expr).forEach(({ metric, matchers }, j) => {
          const other = equalities(theirs[j]!.matchers);
          const apart = [...equalities(matchers)].some(
            ([label, value]) => other.has(label) && other.get(label) !== value,
          );
          assert.ok(apart, `${rule.alert}: ${metric} {${matchers.join(',')}} is production's too`);
        });
      });
    });

    it('takes threshold, for and severity from the values, and leaves out an alert turned off', async () => {
      const off = keys.find((k) => k !== tuned)!;
      // --set gives a decimal threshold as a string, which the chart takes as an operator writes it.
      const set = [
        `prometheusRule.alerts.${tuned}.threshold=${threshold}`,
        `prometheusRule.alerts.${tuned}.for=7m`,
        `prometheusRule.alerts.${tuned}.severity=critical`,
        `prometheusRule.alerts.${off}.enabled=false`,
      ];
      const rules = await rendered(set);
      const rule = rules.find((r) => r.alert === `Switchyard${capitalized(chart)}${capitalized(tuned)}`)!;
      assert.ok(rule.expr.endsWith(` > ${threshold}`), rule.expr);
      assert.deepEqual([rule.for, rule.labels.severity], ['7m', 'critical']);
      assert.equal(rules.length, keys.length - 1);
      assert.ok(!rules.some((r) => r.alert.endsWith(capitalized(off))), off);
    });

    it('refuses to render without its monitor, whose series every alert watches', async () => {
      const alone = on.filter((value) => value !== monitor);
      const enabledKey = monitor.replace(/=true$/, '');
      await assert.rejects(render(chart, undefined, alone), (error: { stderr?: string }) =>
        (error.stderr ?? '').includes(`prometheusRule.enabled needs ${enabledKey}`),
      );
    });

    it('refuses a for Prometheus would not take, and a threshold that is no number', async () => {
      // helm's message, not the command line the error repeats, names the value.
      const refusal = (pattern: RegExp) => (error: { stderr?: string }) => pattern.test(error.stderr ?? '');
      const alert = `prometheusRule.alerts.${tuned}`;
      await assert.rejects(
        render(chart, undefined, [...on, `${alert}.for=5 minutes`]),
        refusal(new RegExp(`${alert}\\.for: Does not match pattern`)),
      );
      await assert.rejects(
        render(chart, undefined, [...on, `${alert}.threshold=lots`]),
        refusal(new RegExp(`${alert}\\.threshold: Does not match pattern`)),
      );
    });
  });
}
