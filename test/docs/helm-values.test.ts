// Every Helm value the docs name is one the chart has: each `--set key=…` of
// a `helm install … charts/<chart>` command in README.md and docs/*.md, each
// `--set` named in the prose, and each key of the values table in
// docs/operations.md (in every chart its first column names) is a key of the
// chart's values.schema.json, which refuses unknown keys at install; and a
// plain default that table gives (a number, true/false, a backticked value)
// is the one the chart's values.yaml holds. A dotted key the docs write in
// backticks (`auth.jwksUrl`, `ingress.className`) is an app's config key
// (docs/configuration.md) or a chart's value.
import { it } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { parse } from 'yaml';

const root = join(import.meta.dirname, '../..');
const DOCS = ['README.md', ...readdirSync(join(root, 'docs')).map((f) => `docs/${f}`)].filter((f) => f.endsWith('.md'));
const CHARTS = readdirSync(join(root, 'charts'));
const text = (file: string): string => readFileSync(join(root, file), 'utf8');

interface Schema {
  readonly properties?: Record<string, Schema>;
  readonly items?: Schema;
  readonly additionalProperties?: boolean | Schema;
  readonly definitions?: Record<string, Schema>;
  readonly $ref?: string;
}
const schemas = new Map(CHARTS.map((c) => [c, JSON.parse(text(`charts/${c}/values.schema.json`)) as Schema]));
const values = new Map(CHARTS.map((c) => [c, parse(text(`charts/${c}/values.yaml`)) as unknown]));

/** `node`, or the definition of the chart's schema its `$ref` names (`#/definitions/<name>`, the form they use). */
function resolved(chart: string, node: Schema | undefined): Schema | undefined {
  const name = /^#\/definitions\/(.+)$/.exec(node?.$ref ?? '')?.[1];
  return name === undefined ? node : schemas.get(chart)!.definitions?.[name];
}

/** True when `key` (`a.b`, `a.list[0].c`) is a value the chart's schema takes. */
function chartHas(chart: string, key: string): boolean {
  let node: Schema | undefined = schemas.get(chart);
  for (const part of key.split('.')) {
    const [, name, index] = /^([\w-]+)((?:\[\d+\])*)$/.exec(part) ?? [];
    if (name === undefined || node === undefined) return false;
    // A map of free keys (annotations, labels, classes) takes any name below it.
    if (node.properties?.[name] === undefined && typeof node.additionalProperties === 'object') return true;
    node = resolved(chart, node.properties?.[name]);
    for (let i = 0; i < index!.length / 3 && node !== undefined; i++) node = resolved(chart, node.items);
  }
  return node !== undefined;
}

/** The value values.yaml holds at `key`, or undefined. */
function chartDefault(chart: string, key: string): unknown {
  let node = values.get(chart);
  for (const part of key.split('.')) node = (node as Record<string, unknown> | null)?.[part];
  return node;
}

/** Helm commands, continuation lines joined, with where each starts. */
function helmCommands(): { where: string; chart: string | undefined; command: string }[] {
  const found = [];
  for (const file of DOCS) {
    const lines = text(file).split('\n');
    for (let i = 0; i < lines.length; i++) {
      if (!/\bhelm (?:install|upgrade)\b/.test(lines[i]!)) continue;
      let command = lines[i]!;
      for (let j = i + 1; command.trimEnd().endsWith('\\') && j < lines.length; j++) {
        command = `${command.trimEnd().slice(0, -1)} ${lines[j]}`;
      }
      // Prose that names the command (`helm install` prints…) sets nothing.
      if (!/\bcharts\/|--set/.test(command)) continue;
      found.push({ where: `${file}:${i + 1}`, chart: /\bcharts\/([\w-]+)/.exec(command)?.[1], command });
    }
  }
  return found;
}

const SET = /--set(?:-string|-json|-file)? '?([\w.[\]-]+)=/g;

/** Rows of the values table: charts, keys (a `.x` continues the first key's parent), defaults. */
function tableRows(): { where: string; charts: string[]; keys: string[]; defaults: string }[] {
  const rows = [];
  for (const [i, line] of text('docs/operations.md').split('\n').entries()) {
    const m = /^\| ((?:all|all three|[a-z]+(?:, [a-z]+)*)) +\| (`[^|]+`) +\| ([^|]*?) +\|/.exec(line);
    if (!m) continue;
    const charts = m[1]!.startsWith('all') ? CHARTS : m[1]!.split(', ');
    const keys: string[] = [];
    let parent = '';
    for (const [, written] of m[2]!.matchAll(/`([\w.]+)`/g)) {
      // `a.b` then `.c` is a.c; `election.leaseDurationMs` / `renewDeadlineMs` is election.renewDeadlineMs.
      const key = written!.startsWith('.')
        ? `${parent}${written!.slice(1)}`
        : keys.length > 0 && !written!.includes('.') && charts.every((c) => !chartHas(c, written!))
          ? `${parent}${written}`
          : written!;
      if (keys.length === 0) parent = key.includes('.') ? key.slice(0, key.lastIndexOf('.') + 1) : '';
      keys.push(key);
    }
    rows.push({ where: `docs/operations.md:${i + 1}`, charts, keys, defaults: m[3]! });
  }
  return rows;
}

/** A default as the table writes it, when it is plain enough to compare; else undefined. */
function plainDefault(written: string): { value: unknown } | undefined {
  if (/^-?\d+(?:\.\d+)?$/.test(written)) return { value: Number(written) };
  if (written === 'true' || written === 'false') return { value: written === 'true' };
  const literal = /^`([^`]*)`$/.exec(written)?.[1];
  if (literal === undefined) return undefined;
  if (literal === '[]' || literal === '{}') return { value: JSON.parse(literal) };
  return { value: literal };
}

it('reads the helm commands and the values table (the checks below have something to compare)', () => {
  assert.deepEqual(CHARTS.sort(), ['gateway', 'runtime', 'scheduler']);
  const commands = helmCommands();
  assert.ok(commands.length >= 8, `${commands.length} helm commands`);
  assert.ok(
    commands.every((c) => c.chart !== undefined && CHARTS.includes(c.chart)),
    'every helm command names a chart',
  );
  assert.ok(tableRows().length >= 20, `${tableRows().length} table rows`);
  assert.ok(chartHas('gateway', 'ingress.tls[0].secretName') && !chartHas('gateway', 'ingress.tls[0].secret'));
  assert.ok(chartHas('runtime', 'classes.anything') && !chartHas('runtime', 'defaultClass'));
  // Through a $ref to a definition of the schema.
  assert.ok(chartHas('scheduler', 'prometheusRule.alerts.epochLag.threshold'));
  assert.ok(!chartHas('scheduler', 'prometheusRule.alerts.noLeader.threshold'));
});

it("every --set of a helm command in the docs is a value of that command's chart", () => {
  const wrong = [];
  for (const { where, chart, command } of helmCommands()) {
    for (const [, key] of command.matchAll(SET))
      if (!chartHas(chart!, key!)) wrong.push(`${where}: ${chart} has no ${key}`);
  }
  assert.deepEqual(wrong, []);
});

it('every --set named in the prose is a value of some chart', () => {
  const wrong = [];
  for (const file of DOCS) {
    for (const [i, line] of text(file).split('\n').entries()) {
      if (/\bhelm |^\s*--set/.test(line)) continue; // commands: checked per chart above
      for (const [, key] of line.matchAll(SET)) {
        if (!CHARTS.some((c) => chartHas(c, key!))) wrong.push(`${file}:${i + 1}: no chart has ${key}`);
      }
    }
  }
  assert.deepEqual(wrong, []);
});

it('every key of the values table in operations.md is a value of each chart the row names', () => {
  const wrong = [];
  for (const { where, charts, keys } of tableRows()) {
    for (const chart of charts)
      for (const key of keys) if (!chartHas(chart, key)) wrong.push(`${where}: ${chart} has no ${key}`);
  }
  assert.deepEqual(wrong, []);
});

it('the plain defaults of the values table are those of values.yaml', () => {
  const wrong = [];
  let compared = 0;
  for (const { where, charts, keys, defaults } of tableRows()) {
    const written = defaults.split(/, | \/ /);
    // Only where the column gives one default per key, in order.
    if (written.length !== keys.length) continue;
    for (const [i, key] of keys.entries()) {
      const plain = plainDefault(written[i]!);
      if (plain === undefined) continue;
      for (const chart of charts) {
        compared++;
        const actual = chartDefault(chart, key);
        if (JSON.stringify(actual) !== JSON.stringify(plain.value)) {
          wrong.push(`${where}: ${chart} ${key} is ${JSON.stringify(actual)}, the table says ${written[i]}`);
        }
      }
    }
  }
  assert.ok(compared >= 15, `${compared} defaults compared`);
  assert.deepEqual(wrong, []);
});

it('every dotted key the docs write in backticks under a config or values group is one an app or a chart takes', () => {
  const config = new Set([...text('docs/configuration.md').matchAll(/^\| `([\w.]+)` +\|/gm)].map((m) => m[1]!));
  const groups = new Set(
    [...config, ...CHARTS.flatMap((c) => Object.keys(schemas.get(c)!.properties ?? {}).map((k) => `${k}.`))]
      .filter((k) => k.includes('.'))
      .map((k) => k.slice(0, k.indexOf('.'))),
  );
  assert.ok(groups.has('auth') && groups.has('ingress') && groups.size >= 20, [...groups].join(' '));
  const wrong = [];
  let checked = 0;
  for (const file of DOCS) {
    for (const [i, line] of text(file).split('\n').entries()) {
      for (const [, key] of line.matchAll(/`([a-z][A-Za-z0-9]*(?:\.[A-Za-z][A-Za-z0-9]*)+)`/g)) {
        // A file name (`tunnel.test.ts`) is not a key.
        if (!groups.has(key!.slice(0, key!.indexOf('.'))) || /\.(?:ts|md|json|ya?ml)$/.test(key!)) continue;
        checked++;
        if (!config.has(key!) && !CHARTS.some((c) => chartHas(c, key!))) wrong.push(`${file}:${i + 1}: ${key}`);
      }
    }
  }
  assert.ok(checked >= 50, `${checked} keys checked`);
  assert.deepEqual(wrong, []);
});
