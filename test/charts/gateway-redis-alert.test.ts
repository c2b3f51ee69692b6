// The gateway chart's alert on the Redis of its route cache
// (SwitchyardGatewayRouteCacheRedisFailing), rendered with the real helm
// binary. Requests go on without Redis, so only
// switchyard_gateway_route_cache_redis_failures_total tells that the gateways
// no longer share their routes; a release whose gateways have no Redis never
// counts a failure, so the alert is rendered exactly when the chart hands the
// gateways a Redis URL (redis.existingSecret, or the URL's variable through
// extraEnv). prometheus-rules.test.ts and runbooks.test.ts hold it, with the
// other alerts, to PromQL on documented metrics of the release's own series.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { chartRenderer, type Manifest } from './helm.ts';
import { podOf } from './manifests.ts';
import { selectorsOf } from './promql.ts';

const { skip, render } = chartRenderer('gateway Redis alert chart tests');

const ALERT = 'SwitchyardGatewayRouteCacheRedisFailing';
const METRIC = 'switchyard_gateway_route_cache_redis_failures_total';
const URL_VARIABLE = 'SWITCHYARD_ROUTE_CACHE_REDIS_URL';

type Rule = { alert: string; expr: string; for: string; labels: Record<string, string> };
type RuleManifest = Manifest & { spec: { groups: { rules: Rule[] }[] } };

/** The release as rendered with `set`, its rule on: its Redis alert, if any, and whether its gateways get a Redis URL. */
async function releaseWith(set: readonly string[]): Promise<{ rule: Rule | undefined; redis: boolean }> {
  const on = ['prometheusRule.enabled=true', 'serviceMonitor.enabled=true'];
  const manifests = await render('gateway', undefined, [...on, ...set], { release: 'blue', namespace: 'edge' });
  const rules = manifests
    .filter((m): m is RuleManifest => m.kind === 'PrometheusRule')
    .flatMap((m) => m.spec.groups.flatMap((g) => g.rules));
  const deployment = manifests.find((m) => m.kind === 'Deployment')!;
  const env = (podOf(deployment).containers[0]!.env ?? []) as { name: string }[];
  return { rule: rules.find((r) => r.alert === ALERT), redis: env.some((e) => e.name === URL_VARIABLE) };
}

describe(`charts/gateway: ${ALERT}`, { skip }, () => {
  it('is left out of a release whose gateways have no Redis, where no failure is ever counted', async () => {
    for (const set of [
      [],
      ['redis.keyPrefix=staging:route:'],
      ['extraEnv[0].name=SWITCHYARD_LOG_LEVEL', 'extraEnv[0].value=debug'],
    ]) {
      const { rule, redis } = await releaseWith(set);
      assert.equal(redis, false, set.join(' ') || 'defaults');
      assert.equal(rule, undefined, set.join(' ') || 'defaults');
    }
  });

  it('is rendered once the gateways get a Redis URL: from redis.existingSecret, or through extraEnv', async () => {
    for (const set of [
      ['redis.existingSecret=switchyard-redis'],
      [`extraEnv[0].name=${URL_VARIABLE}`, 'extraEnv[0].value=redis://redis.edge.svc:6379'],
      [
        `extraEnv[0].name=${URL_VARIABLE}`,
        'extraEnv[0].valueFrom.secretKeyRef.name=switchyard-redis',
        'extraEnv[0].valueFrom.secretKeyRef.key=url',
      ],
    ]) {
      const { rule, redis } = await releaseWith(set);
      assert.equal(redis, true, set.join(' '));
      assert.ok(rule, `${set.join(' ')}: no ${ALERT}`);
      assert.deepEqual(
        selectorsOf(rule.expr).map((s) => s.metric),
        [METRIC],
        rule.expr,
      );
      assert.deepEqual([rule.for, rule.labels.severity], ['10m', 'warning']);
    }
  });

  it('takes for and severity from the values, and is left out when turned off', async () => {
    const redis = 'redis.existingSecret=switchyard-redis';
    const entry = 'prometheusRule.alerts.routeCacheRedisFailing';
    const { rule } = await releaseWith([redis, `${entry}.for=30m`, `${entry}.severity=critical`]);
    assert.deepEqual([rule?.for, rule?.labels.severity], ['30m', 'critical']);
    assert.equal((await releaseWith([redis, `${entry}.enabled=false`])).rule, undefined);
  });
});
