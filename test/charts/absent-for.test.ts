// The absent() alerts of the charts' PrometheusRules (the scheduler's
// noLeader, the gateway's and the runtime's absent) against the interval of
// the chart's monitor: one failed scrape marks a target's series stale at
// once, so absent() turns true at the first scrape that misses and false at
// the next that answers. With a `for` under two intervals, one missed scrape
// of the last pod (a restart, a slow answer) fires the alert; the charts
// refuse to render such values, saying which to set, and refuse a duration
// they cannot read rather than compare it misread. Rendered with the real helm
// binary; the schema refuses most unreadable forms first, so those cases skip
// it (`--skip-schema-validation`, as an operator can) to reach the template.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { parseAllDocuments } from 'yaml';
import { chartRenderer } from './helm.ts';

const { skip, helmRun } = chartRenderer('chart absent() for tests');

const CHARTS = [
  { chart: 'scheduler', key: 'noLeader', alert: 'SwitchyardSchedulerNoLeader', monitor: 'serviceMonitor' },
  { chart: 'gateway', key: 'absent', alert: 'SwitchyardGatewayAbsent', monitor: 'serviceMonitor' },
  { chart: 'runtime', key: 'absent', alert: 'SwitchyardRuntimeAbsent', monitor: 'podMonitor' },
] as const;

type Rule = { alert: string; for: string };
type RuleManifest = { kind: string; spec: { groups: { rules: Rule[] }[] } };

for (const { chart, key, alert, monitor } of CHARTS) {
  describe(`charts/${chart}: the for of ${alert} against ${monitor}.interval`, { skip }, () => {
    const forKey = `prometheusRule.alerts.${key}.for`;
    const intervalKey = `${monitor}.interval`;
    const on = ['prometheusRule.enabled=true', `${monitor}.enabled=true`];
    const helm = (set: readonly string[], flags: readonly string[] = []) =>
      helmRun([
        'template',
        'sy',
        `charts/${chart}`,
        '--namespace',
        'switchyard',
        ...flags,
        ...set.flatMap((s) => ['--set', s]),
      ]);
    /** The `for` of the absent() alert as rendered with `set`, or undefined when it is left out. */
    const renderedFor = async (set: readonly string[]): Promise<string | undefined> => {
      const manifests = parseAllDocuments(await helm(set)).map((d) => d.toJSON() as RuleManifest | null);
      const rules = manifests.filter((m) => m?.kind === 'PrometheusRule').flatMap((m) => m!.spec.groups[0]!.rules);
      return rules.find((r) => r.alert === alert)?.for;
    };
    const refusal = (pattern: RegExp) => (error: { stderr?: string }) => {
      assert.match(error.stderr ?? '', pattern);
      return true;
    };

    it('renders the defaults, and a for of at least twice the interval in each form Prometheus takes', async () => {
      assert.ok(await renderedFor(on));
      for (const [forValue, interval] of [
        ['1m', '30s'],
        ['90s', '45s'],
        ['1m30s', '45s'],
        ['2h', '1h'],
        ['1h30m', '45m'],
        ['1m', '500ms'],
        ['1d', '1h'],
      ]) {
        const set = [...on, `${forKey}=${forValue}`, `${intervalKey}=${interval}`];
        assert.equal(await renderedFor(set), forValue, `${forValue} against ${interval}`);
      }
    });

    it('refuses a for under twice the interval, naming both values and what to set', async () => {
      for (const [forValue, interval, least, most] of [
        ['1m', '45s', '1m30s', '30s'],
        ['1m30s', '1m', '2m', '45s'],
        ['5m', '2m31s', '5m2s', '2m30s'],
        ['1h59m59s', '1h', '2h', '59m59s500ms'],
        ['30s', '30s', '1m', '15s'],
      ]) {
        const set = [...on, `${forKey}=${forValue}`, `${intervalKey}=${interval}`];
        await assert.rejects(
          helm(set),
          refusal(
            new RegExp(
              `${forKey} \\(${forValue}\\) is under twice ${intervalKey} \\(${interval}\\).*` +
                `Set ${forKey} to at least ${least}, or ${intervalKey} to at most ${most}`,
            ),
          ),
          `${forValue} against ${interval}`,
        );
      }
    });

    it('checks only an absent() alert that is rendered', async () => {
      const short = [`${forKey}=1m`, `${intervalKey}=45s`];
      assert.equal(await renderedFor([...on, ...short, `prometheusRule.alerts.${key}.enabled=false`]), undefined);
      assert.equal(await renderedFor([`${monitor}.enabled=true`, ...short]), undefined);
    });

    it('refuses a duration it cannot read, naming the value, rather than pass it', async () => {
      const unchecked = ['--skip-schema-validation'];
      for (const [set, named] of [
        [[`${forKey}=5 minutes`], forKey],
        [[`${forKey}=300`], forKey],
        [[`${forKey}=`], forKey],
        [[`${intervalKey}=1.5m`], intervalKey],
        [[`${intervalKey}=30`], intervalKey],
      ] as const) {
        await assert.rejects(
          helm([...on, ...set], unchecked),
          refusal(new RegExp(`${named.replaceAll('.', '\\.')} \\(.*\\) is no duration this chart reads`)),
          set.join(' '),
        );
      }
    });
  });
}
