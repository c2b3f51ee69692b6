// Names the README and docs/*.md give a reader to type or look for are ones
// the repository has: a file path (`test/e2e/…test.ts`, `charts/gateway`)
// exists, an `npm run <script>` is a script of package.json and
// `npm run bench -- <suite>` a suite of test/bench, an `X-Switchyard-*`
// header is one @switchyard/protocol defines, and a `SWITCHYARD_*`
// environment variable is one an app's config (docs/configuration.md,
// which configuration.test.ts keeps generated) or the CLI reads. The
// README's layout names every folder of apps/, libs/, charts/ and test/, and
// every page of docs/.
import { it } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import {
  FORWARDED_HEADER,
  IDENTITY_HEADERS,
  PROXY_ERROR_HEADER,
  SYNC_FEATURES_HEADER,
  WATCH_FEATURES_HEADER,
} from '@switchyard/protocol';

const root = join(import.meta.dirname, '../..');
const DOCS = ['README.md', ...readdirSync(join(root, 'docs')).map((f) => `docs/${f}`)].filter((f) => f.endsWith('.md'));
const text = (file: string): string => readFileSync(join(root, file), 'utf8');

/** Every match of `pattern` (global, capture 1) in the docs, with where it is. */
function named(pattern: RegExp): { where: string; name: string }[] {
  const found = [];
  for (const file of DOCS) {
    for (const [i, line] of text(file).split('\n').entries()) {
      for (const m of line.matchAll(pattern)) found.push({ where: `${file}:${i + 1}`, name: m[1]! });
    }
  }
  return found;
}

/** Paths from the repository root; a placeholder (`libs/<lib>/test`) or a glob ends the path before it. */
const PATH = /(?<![\w./-])(?:\.\/)?((?:apps|libs|test|scripts|charts|docs|\.ci)\/[\w./-]*\w)/g;
/** A relative Markdown link, `[text](file.md#anchor)`. */
const LINK = /\]\((?!https?:|mailto:)([^)\s]+)\)/g;
const NPM_RUN = /\bnpm run ([\w:-]+)/g;
const BENCH_SUITE = /\bnpm run bench -- ([a-z][\w-]*)/g;
const HEADER = /\b(X-Switchyard-[A-Za-z][A-Za-z-]*[A-Za-z])/gi;
const ENV = /\b(SWITCHYARD_[A-Z0-9_]*[A-Z0-9])\b/g;

it('finds paths, scripts, bench suites, headers and variables in the docs (the checks below have something to compare)', () => {
  assert.ok(named(PATH).length >= 100, `${named(PATH).length} paths`);
  assert.ok(named(LINK).length >= 10, `${named(LINK).length} links`);
  assert.ok(named(NPM_RUN).length >= 10, `${named(NPM_RUN).length} npm run`);
  assert.ok(named(BENCH_SUITE).length >= 5, `${named(BENCH_SUITE).length} bench suites`);
  assert.ok(named(HEADER).length >= 10, `${named(HEADER).length} headers`);
  assert.ok(named(ENV).length >= 50, `${named(ENV).length} variables`);
});

it('every repository path the docs name exists', () => {
  const missing = named(PATH).filter(({ name }) => !existsSync(join(root, name)));
  assert.deepEqual(
    missing.map(({ where, name }) => `${where}: ${name}`),
    [],
  );
});

/** GitHub's anchor of a heading: lower case, punctuation dropped, spaces as hyphens. */
function anchors(file: string): Set<string> {
  const headings = [...text(file).matchAll(/^#+ (.+)$/gm)].map((m) => m[1]!);
  return new Set(
    headings.map((h) =>
      h
        .toLowerCase()
        .replace(/[^\w\s-]/g, '')
        .replace(/\s/g, '-'),
    ),
  );
}

it('every relative link of the docs reaches a file, and a heading of it when it names one', () => {
  const wrong = [];
  for (const { where, name } of named(LINK)) {
    const [target, anchor] = name.split('#') as [string, string | undefined];
    const file = target === '' ? where.split(':')[0]! : join(where.split(':')[0]!, '..', target);
    if (!existsSync(join(root, file))) wrong.push(`${where}: no file ${target}`);
    else if (anchor !== undefined && !anchors(file).has(anchor))
      wrong.push(`${where}: no heading #${anchor} in ${file}`);
  }
  assert.deepEqual(wrong, []);
});

it('every `npm run` script the docs name is in package.json, and every bench suite in test/bench', () => {
  const scripts = (JSON.parse(text('package.json')) as { scripts: Record<string, string> }).scripts;
  const wrong = [
    ...named(NPM_RUN)
      .filter(({ name }) => scripts[name] === undefined)
      .map(({ where, name }) => `${where}: no script ${name}`),
    ...named(BENCH_SUITE)
      .filter(({ name }) => !existsSync(join(root, 'test/bench', name, 'main.ts')))
      .map(({ where, name }) => `${where}: no bench suite ${name}`),
  ];
  assert.deepEqual(wrong, []);
});

it('every X-Switchyard-* header the docs name is one the protocol defines', () => {
  const known = new Set(
    [
      ...Object.values(IDENTITY_HEADERS),
      FORWARDED_HEADER,
      PROXY_ERROR_HEADER,
      SYNC_FEATURES_HEADER,
      WATCH_FEATURES_HEADER,
    ].map((h) => h.toLowerCase()),
  );
  const unknown = named(HEADER).filter(({ name }) => !known.has(name.toLowerCase()));
  assert.deepEqual(
    unknown.map(({ where, name }) => `${where}: ${name}`),
    [],
  );
});

it('every SWITCHYARD_* variable the docs name is one an app or the CLI reads', () => {
  const config = text('docs/configuration.md');
  const known = new Set([...config.matchAll(/^\| `[\w.]+` +\| `(SWITCHYARD_[A-Z0-9_]+)`/gm)].map((m) => m[1]!));
  known.add('SWITCHYARD_CONFIG'); // the config file, named in configuration.md's introduction
  const usage = execFileSync(process.execPath, [join(root, 'apps/cli/src/main.ts'), '--help'], { encoding: 'utf8' });
  for (const [name] of usage.matchAll(ENV)) known.add(name);
  // Variables kubelet makes for a Service named switchyard-<x> (operations.md: what enableServiceLinks prevents).
  const serviceLink = /^SWITCHYARD_(?:SCHEDULER|GATEWAY|RUNTIME)_(?:SERVICE_HOST|SERVICE_PORT|PORT)$/;
  const unknown = named(ENV).filter(({ name }) => !known.has(name) && !serviceLink.test(name));
  assert.deepEqual(
    unknown.map(({ where, name }) => `${where}: ${name}`),
    [],
  );
});

it("README's layout names every folder of apps/, libs/, charts/ and test/, and every page of docs/", () => {
  const readme = text('README.md');
  const start = readme.indexOf('## Layout');
  const block = readme.slice(
    readme.indexOf('```\n', start) + 4,
    readme.indexOf('\n```', readme.indexOf('```\n', start) + 4),
  );
  /** What the block says of `top/`: from its line up to the next top-level line. */
  const entry = (top: string): string =>
    new RegExp(String.raw`^${top}/ +([\s\S]*?)(?=^[a-z]+/ |(?![\s\S]))`, 'm').exec(block)?.[1] ?? '';
  const missing = [];
  for (const top of ['apps', 'libs', 'charts', 'test']) {
    const folders = readdirSync(join(root, top), { withFileTypes: true }).filter((d) => d.isDirectory());
    for (const { name } of folders) {
      if (!new RegExp(String.raw`\b${name}\b`).test(entry(top))) missing.push(`${top}/${name}`);
    }
  }
  for (const page of readdirSync(join(root, 'docs')).filter((f) => f.endsWith('.md'))) {
    if (!new RegExp(String.raw`\b${page.replace(/\.md$/, '')}\b`).test(entry('docs'))) missing.push(`docs/${page}`);
  }
  assert.ok(entry('libs').includes('protocol') && entry('test').includes('e2e'), block);
  assert.deepEqual(missing, []);
});
