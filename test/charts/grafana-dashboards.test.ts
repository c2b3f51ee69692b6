// The charts' Grafana dashboards (grafanaDashboard.enabled), rendered with
// the real helm binary: one ConfigMap, valid by the Kubernetes schema, with
// the label Grafana's dashboard sidecar looks for, holding one dashboard
// whose uid and title tell releases apart; every panel reads the `datasource`
// variable, and every query is PromQL by the Prometheus project's own grammar
// (lezer-promql), once Grafana's variables are given the values it would
// give them, on metrics the table of docs/operations.md lists, on the
// release's own series: the labels its own ServiceMonitor or PodMonitor
// gives them, as the alerts (prometheus-rules.test.ts) are held to.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { chartRenderer, type Manifest } from './helm.ts';
import { assertValidObjects } from './models.ts';
import { selectorsOf } from './promql.ts';
import { documentedMetrics, releaseMatcher } from './scrape-scope.ts';

const { skip, render } = chartRenderer('chart Grafana dashboard tests');

type Target = { refId: string; expr: string; datasource?: { type: string; uid: string } };
type Panel = {
  id: number;
  type: string;
  title: string;
  datasource?: { type: string; uid: string };
  gridPos: { x: number; y: number; w: number; h: number };
  targets?: Target[];
};
type Variable = { name: string; type: string; query: string; current?: { value?: string } };
type Dashboard = {
  uid: string;
  title: string;
  schemaVersion: number;
  templating: { list: Variable[] };
  panels: Panel[];
};
type ConfigMap = Manifest & {
  metadata: { labels?: Record<string, string>; annotations?: Record<string, string> };
  data: Record<string, string>;
};

/** The ConfigMaps holding a dashboard: JSON files (the runtime chart has a ConfigMap of its own config too). */
const dashboardMaps = (manifests: Manifest[]): ConfigMap[] =>
  manifests.filter(
    (m): m is ConfigMap =>
      m.kind === 'ConfigMap' && Object.keys((m as ConfigMap).data ?? {}).some((key) => key.endsWith('.json')),
  );

/** The one dashboard of a rendered release: its ConfigMap's data key and the JSON parsed. */
function dashboardOf(manifests: Manifest[]): { key: string; dashboard: Dashboard; map: ConfigMap } {
  const maps = dashboardMaps(manifests);
  assert.equal(maps.length, 1, 'one dashboard ConfigMap');
  const entries = Object.entries(maps[0]!.data);
  assert.equal(entries.length, 1, `keys: ${entries.map(([k]) => k).join(', ')}`);
  const [key, json] = entries[0]!;
  return { key, dashboard: JSON.parse(json) as Dashboard, map: maps[0]! };
}

const targetsOf = (dashboard: Dashboard): { panel: string; target: Target }[] =>
  dashboard.panels.flatMap((p) => (p.targets ?? []).map((target) => ({ panel: p.title, target })));

/** What Grafana gives `$__rate_interval` at the default 30s scrape interval: four of them. */
const RATE_INTERVAL = '2m';

/**
 * An expression as Grafana sends it to Prometheus: `$__rate_interval` a duration, each of the dashboard's
 * constant variables (`$namespace`, `${service}`) its value.
 */
function substituted(expr: string, variables: Variable[]): string {
  const values = new Map(variables.filter((v) => v.type === 'constant').map((v) => [v.name, v.query]));
  const out = expr
    .replaceAll('$__rate_interval', RATE_INTERVAL)
    .replace(/\$\{(\w+)\}|\$(\w+)/g, (whole, braced?: string, bare?: string) => values.get(braced ?? bare!) ?? whole);
  assert.doesNotMatch(out, /\$/, `a variable the dashboard does not define, in ${expr}`);
  return out;
}

/** The table's row a selector's metric is: itself, or the histogram whose _bucket, _sum or _count series it is. */
function documentedAs(metric: string): string | undefined {
  if (documentedMetrics.has(metric)) return metric;
  const base = metric.replace(/_(bucket|sum|count)$/, '');
  return documentedMetrics.get(base) === 'histogram' ? base : undefined;
}

/** Per chart: what turns its monitor on; the values under which it scrapes a Service of another name; what its panels must show. */
const CHARTS = [
  {
    chart: 'scheduler',
    monitor: 'serviceMonitor.enabled=true',
    scrapes: [[], ['metricsPort=null']],
    shows: [
      'switchyard_scheduler_is_leader',
      'switchyard_scheduler_term',
      'switchyard_scheduler_epoch',
      'switchyard_scheduler_epoch_lag_seconds',
      'switchyard_scheduler_epoch_snapshots_sent_total',
      'switchyard_scheduler_epoch_catch_up_deltas_total',
      'switchyard_scheduler_runtimes',
      'switchyard_scheduler_schedule_requests_total',
      'switchyard_scheduler_schedule_duration_seconds',
      'switchyard_scheduler_tunnel_streams_busiest',
      'switchyard_scheduler_connections_open',
      'switchyard_scheduler_connections_refused_total',
    ],
  },
  {
    chart: 'gateway',
    monitor: 'serviceMonitor.enabled=true',
    scrapes: [[], ['metricsPort=null']],
    shows: [
      'switchyard_gateway_requests_total',
      'switchyard_gateway_upstream_errors_total',
      'switchyard_gateway_refusals_total',
      'switchyard_gateway_schedule_duration_seconds',
      'switchyard_gateway_route_cache_lookups_total',
      'switchyard_gateway_route_cache_redis_failures_total',
      'switchyard_gateway_sse_streams_open',
      'switchyard_gateway_connections_open',
      'switchyard_gateway_connections_refused_total',
    ],
  },
  {
    chart: 'runtime',
    monitor: 'podMonitor.enabled=true',
    scrapes: [[]],
    shows: [
      'switchyard_runtime_tunnel_connected',
      'switchyard_runtime_sandboxes',
      'switchyard_runtime_class_sandboxes',
      'switchyard_runtime_sandboxes_died_total',
      'switchyard_runtime_tool_calls_total',
      'switchyard_runtime_tool_call_duration_seconds',
      'switchyard_runtime_tool_calls_cancelled_total',
      'switchyard_runtime_connections_open',
      'switchyard_runtime_connections_refused_total',
    ],
  },
] as const;

it('the variable substitution leaves no variable unknown to the dashboard (its passing below means something)', () => {
  const variables: Variable[] = [{ name: 'namespace', type: 'constant', query: 'edge' }];
  assert.equal(
    substituted('rate(x{namespace="${namespace}"}[$__rate_interval])', variables),
    'rate(x{namespace="edge"}[2m])',
  );
  assert.throws(() => substituted('x{namespace="$namespace",service="$service"}', variables), /does not define/);
  assert.equal(
    documentedAs('switchyard_gateway_schedule_duration_seconds_bucket'),
    'switchyard_gateway_schedule_duration_seconds',
  );
  assert.equal(documentedAs('switchyard_gateway_requests_total_count'), undefined);
});

for (const { chart, monitor, scrapes, shows } of CHARTS) {
  describe(`charts/${chart}: grafanaDashboard`, { skip }, () => {
    const on = ['grafanaDashboard.enabled=true', monitor];

    it('renders none by default', async () => {
      assert.deepEqual(dashboardMaps(await render(chart)), []);
      assert.deepEqual(dashboardMaps(await render(chart, undefined, [monitor])), []);
    });

    it("renders one valid ConfigMap with the sidecar's label, the labels and annotations given", async () => {
      const set = [
        ...on,
        'grafanaDashboard.labels.team=platform',
        'grafanaDashboard.annotations.grafana_folder=Switchyard',
      ];
      const manifests = await render(chart, undefined, set);
      assertValidObjects(dashboardMaps(manifests));
      const { map } = dashboardOf(manifests);
      assert.equal(map.metadata.labels?.grafana_dashboard, '1');
      assert.equal(map.metadata.labels?.team, 'platform');
      assert.equal(map.metadata.labels?.['app.kubernetes.io/part-of'], 'switchyard');
      assert.equal(map.metadata.annotations?.grafana_folder, 'Switchyard');
      // A sidecar that looks for another value of the label.
      const other = dashboardOf(
        await render(chart, undefined, [...on, 'grafanaDashboard.labels.grafana_dashboard=ops']),
      );
      assert.equal(other.map.metadata.labels?.grafana_dashboard, 'ops');
    });

    it('holds a dashboard of a current Grafana whose panels all read the datasource variable, a Prometheus', async () => {
      const { dashboard } = dashboardOf(await render(chart, undefined, on));
      assert.ok(dashboard.schemaVersion >= 39, `schemaVersion ${dashboard.schemaVersion}`);
      const datasource = dashboard.templating.list.find((v) => v.name === 'datasource');
      assert.deepEqual([datasource?.type, datasource?.query], ['datasource', 'prometheus']);
      const ids = dashboard.panels.map((p) => p.id);
      assert.equal(new Set(ids).size, ids.length, `panel ids ${ids.join(',')}`);
      for (const panel of dashboard.panels) {
        assert.deepEqual(panel.datasource, { type: 'prometheus', uid: '${datasource}' }, panel.title);
        assert.ok(panel.gridPos.x + panel.gridPos.w <= 24, `${panel.title} fits Grafana's 24 columns`);
        assert.ok((panel.targets?.length ?? 0) > 0, `${panel.title} has a query`);
        for (const target of panel.targets ?? []) {
          assert.deepEqual(target.datasource ?? panel.datasource, panel.datasource, `${panel.title} ${target.refId}`);
        }
      }
    });

    it("writes every query in PromQL, on documented metrics, on the release's own series, rates over $__rate_interval", async () => {
      for (const set of scrapes) {
        const manifests = await render(chart, undefined, [...on, ...set], { release: 'blue', namespace: 'edge' });
        const own = releaseMatcher(manifests, 'edge');
        const { dashboard } = dashboardOf(manifests);
        const named = new Set<string>();
        for (const { panel, target } of targetsOf(dashboard)) {
          // Grafana picks the window of a rate from the scrape interval and the zoom: a fixed one is too short
          // for a slow scrape, or hides spikes once zoomed in.
          for (const [range] of target.expr.matchAll(/\[[^\]]*\]/g)) assert.equal(range, '[$__rate_interval]', panel);
          const expr = substituted(target.expr, dashboard.templating.list);
          const selectors = selectorsOf(expr);
          assert.ok(selectors.length > 0, `${panel}: ${expr}`);
          for (const { metric, matchers } of selectors) {
            const where = `${panel} (${set.join(' ') || 'defaults'}): ${metric} {${matchers.join(',')}}`;
            const row = documentedAs(metric);
            assert.ok(row, `${where}: not in the metrics table of docs/operations.md`);
            named.add(row);
            assert.ok(matchers.includes('namespace="edge"'), where);
            assert.ok(matchers.includes(own), `${where} lacks ${own}`);
          }
        }
        assert.deepEqual(
          shows.filter((metric) => !named.has(metric)),
          [],
          'metrics no panel shows',
        );
      }
    });

    it('tells releases apart: two in one namespace, and one name in two namespaces', async () => {
      const at = async (release: string, namespace: string) =>
        dashboardOf(await render(chart, undefined, on, { release, namespace }));
      const seen = [await at('staging', 'shop'), await at('production', 'shop'), await at('staging', 'lab')];
      for (const { key, dashboard } of seen) {
        // Grafana takes a uid of at most 40 characters of these.
        assert.match(dashboard.uid, /^[A-Za-z0-9_-]{1,40}$/);
        // The sidecar writes every key of every namespace into one folder: a key two releases share, one overwrites.
        assert.equal(key, `${dashboard.uid}.json`);
      }
      const distinct = (values: string[]) => assert.equal(new Set(values).size, values.length, values.join(' | '));
      distinct(seen.map((s) => s.dashboard.uid));
      // Grafana refuses a second dashboard of the same title in a folder.
      distinct(seen.map((s) => s.dashboard.title));
      // Each is held to its own release's series.
      const [staging, production] = seen.map((s) =>
        targetsOf(s.dashboard).map(({ target }) => substituted(target.expr, s.dashboard.templating.list)),
      );
      staging!.forEach((expr, i) => assert.notEqual(expr, production![i], expr));
    });

    it('refuses to render without its monitor, whose series every panel shows', async () => {
      const enabledKey = monitor.replace(/=true$/, '');
      await assert.rejects(render(chart, undefined, ['grafanaDashboard.enabled=true']), (error: { stderr?: string }) =>
        (error.stderr ?? '').includes(`grafanaDashboard.enabled needs ${enabledKey}`),
      );
    });
  });
}

it('each chart has its dashboard: the uids of one release differ by chart', async (t) => {
  if (skip) return t.skip(skip);
  const uids = await Promise.all(
    CHARTS.map(
      async ({ chart, monitor }) =>
        dashboardOf(await render(chart, undefined, ['grafanaDashboard.enabled=true', monitor])).dashboard.uid,
    ),
  );
  assert.equal(new Set(uids).size, CHARTS.length, uids.join(' | '));
});
