// Every metric the docs name is one the apps export, of the type the table in
// docs/operations.md gives, and each of Switchyard's own metrics (not
// prom-client's process defaults) has a row in that table. The apps run as
// processes, as deployed; a runtime's metrics are read through a scheduler's
// `/api/proxy/<runtime>/metrics`, where operations.md says any scheduler
// serves them.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { REFUSAL_REASONS, UPSTREAM_ERROR_REASONS } from '@switchyard/gateway';
import { startCluster, type TestCluster } from '../support/cluster.ts';

const root = join(import.meta.dirname, '../..');
const DOCS = ['README.md', ...readdirSync(join(root, 'docs')).map((f) => `docs/${f}`)].filter((f) => f.endsWith('.md'));
const text = (file: string): string => readFileSync(join(root, file), 'utf8');
/** prom-client's default metrics, which the table leaves to one sentence. */
const DEFAULT_METRIC = /^switchyard_[a-z]+_(process|nodejs)_/;

/** The text exposition at `url`. */
async function scrape(url: string): Promise<string> {
  const res = await fetch(url, { signal: AbortSignal.timeout(5000) });
  assert.equal(res.status, 200, url);
  return res.text();
}

/** Metric families and their types, from `# TYPE` lines of the text exposition. */
function families(exposition: string): Map<string, string> {
  const types = new Map<string, string>();
  for (const m of exposition.matchAll(/^# TYPE (\S+) (\S+)$/gm)) types.set(m[1]!, m[2]!);
  return types;
}

/** The metrics the charts' alerts watch with absent(), which then fires once no process exports them. */
const watchedByAbsent = ['gateway', 'scheduler', 'runtime'].flatMap((chart) => [
  ...text(`charts/${chart}/templates/prometheusrule.yaml`).matchAll(/\babsent\((switchyard_[a-z0-9_]+)\{/g),
]);

/** The rows of the metrics table in operations.md: name → type. */
function tableRows(): Map<string, string> {
  const rows = new Map<string, string>();
  for (const m of text('docs/operations.md').matchAll(/^\| `(switchyard_[a-z0-9_]+)` +\| (\w+) +\|/gm)) {
    rows.set(m[1]!, m[2]!);
  }
  return rows;
}

/** The cells of the table's row for `name`: metric, type, labels, meaning. */
function tableRow(name: string): string[] {
  const row = text('docs/operations.md')
    .split('\n')
    .find((line) => line.startsWith(`| \`${name}\` `));
  assert.ok(row, `a row for ${name}`);
  return row.split(' | ').map((cell) => cell.trim());
}

it('the table lists the reasons of upstream_errors_total the gateway counts, no other', () => {
  // Its meaning names each reason in backticks, some with what it means in parentheses.
  const meaning = tableRow('switchyard_gateway_upstream_errors_total')[3]!;
  const documented = [...meaning.matchAll(/`([a-z_]+)`/g)].map((m) => m[1]!);
  assert.deepEqual(documented.toSorted(), [...UPSTREAM_ERROR_REASONS].toSorted());
});

it('the Refusals table lists the reasons of refusals_total the gateway exports, no other', () => {
  // The section's table, up to the next heading: one row per reason, the reason in backticks first.
  const section = text('docs/operations.md')
    .split(/^### Refusals$/m)[1]!
    .split(/^##/m)[0]!;
  const documented = [...section.matchAll(/^\| `([a-z_]+)` +\|/gm)].map((m) => m[1]!);
  assert.deepEqual(documented.toSorted(), [...REFUSAL_REASONS].toSorted());
});

describe('metrics named in the docs', () => {
  let cluster: TestCluster;
  const exported = new Map<string, string>();
  /** The names of the samples exported (a family with none, such as a labelled metric never set, is absent). */
  const sampled = new Set<string>();

  before(async () => {
    // The direct listener on, for the connections_* metrics only it brings.
    const direct = [
      '--direct-listen.enabled',
      'true',
      '--direct-listen.host',
      '127.0.0.1',
      '--direct-listen.port',
      '0',
    ];
    // A metering Redis that never answers, for the metering_* metrics only the Redis sink brings.
    const metering = ['--metering.redis-url', 'redis://127.0.0.1:1'];
    const runtimeArgs = [...direct, '--direct-listen.token', 'a-direct-token-0123456789abcdef', ...metering];
    cluster = await startCluster({ schedulers: 1, runtimes: 1, gateways: 1, runtimeArgs });
    const scheduler = cluster.schedulerUrls()[0]!;
    const gateway = cluster.gatewayUrl().replace(/\/mcp$/, '');
    for (const url of [`${scheduler}/metrics`, `${gateway}/metrics`, `${scheduler}/api/proxy/r0/metrics`]) {
      const exposition = await scrape(url);
      for (const [name, type] of families(exposition)) exported.set(name, type);
      for (const m of exposition.matchAll(/^([a-z_][a-z0-9_]*)[{ ]/gm)) sampled.add(m[1]!);
    }
  });
  after(() => cluster?.stop());

  it('reads each app’s own metrics and the table (the check below has something to compare)', () => {
    for (const app of ['scheduler', 'gateway', 'runtime']) {
      assert.ok(
        [...exported.keys()].some((n) => n.startsWith(`switchyard_${app}_`) && !DEFAULT_METRIC.test(n)),
        app,
      );
    }
    assert.ok(tableRows().size >= 20, `${tableRows().size} rows`);
  });

  it('are exported by the apps, by full name or as the suffix the text abbreviates', () => {
    const names = [...exported.keys()];
    const missing: string[] = [];
    for (const file of DOCS) {
      const doc = text(file);
      for (const [, name] of doc.matchAll(/\b(switchyard_[a-z0-9_]*[a-z0-9])\b/g)) {
        if (!exported.has(name!)) missing.push(`${file}: ${name}`);
      }
      // `…_nodejs_eventloop_lag_p99_seconds` and `upstream_errors_total{reason="tls"}` name a metric by its end.
      const short = /(?:…_|`)([a-z][a-z0-9_]*_(?:total|seconds|bytes))\b/g;
      for (const [, suffix] of doc.matchAll(short)) {
        if (suffix!.startsWith('switchyard_')) continue;
        if (!names.some((n) => n.endsWith(`_${suffix}`))) missing.push(`${file}: …_${suffix}`);
      }
    }
    assert.deepEqual(missing, []);
  });

  it("that the charts' absent() alerts watch have a sample from each app's start, before any traffic", () => {
    // Else absent() would fire on a healthy release that has not served a request yet.
    const metrics = watchedByAbsent.map((m) => m[1]!);
    assert.ok(metrics.length >= 3, `absent() over ${metrics.join(', ') || 'nothing'}`);
    assert.deepEqual(
      metrics.filter((name) => !sampled.has(name)),
      [],
    );
  });

  it('have the type the table gives', () => {
    const wrong = [...tableRows()]
      .filter(([name, type]) => exported.get(name) !== type)
      .map(([name, type]) => `${name}: table says ${type}, exported ${exported.get(name) ?? 'nothing'}`);
    assert.deepEqual(wrong, []);
  });

  it('each of Switchyard’s own metrics has a row in the table', () => {
    const rows = tableRows();
    const undocumented = [...exported.keys()].filter((n) => !DEFAULT_METRIC.test(n) && !rows.has(n));
    assert.deepEqual(undocumented, []);
  });
});
