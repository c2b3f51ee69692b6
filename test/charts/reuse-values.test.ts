// `helm upgrade --reuse-values` renders the new chart's templates with the
// values of the release it upgrades in place of the chart's values.yaml, so a
// release installed from an earlier chart lacks every key added since. Each
// chart must render such values as a plain install of them would, the newer
// features at their defaults. The tests render a copy of the chart whose
// values.yaml is an earlier one, as helm does, with the real helm binary as
// the other chart tests do, and compare it with the chart itself given those
// values.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { cpSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { parse, parseAllDocuments, stringify } from 'yaml';
import { locateHelm, root, run } from './helm.ts';

const { helm, skip } = locateHelm('chart --reuse-values tests');

type Values = Record<string, unknown>;
const isMap = (v: unknown): v is Values => typeof v === 'object' && v !== null && !Array.isArray(v);

/**
 * Keys whose value null turns a feature off. Helm drops a key set to null
 * before the templates see it, so they cannot tell it from a missing one: a
 * release from before the key renders with the feature off, as it ran.
 */
const OFF_WHEN_MISSING: Record<string, readonly string[]> = {
  gateway: ['metricsPort'],
  scheduler: ['metricsPort'],
  runtime: [],
};

/** `values` without the keys of `values` absent from `earlier`, at any depth; maps that hold such keys stay, emptied of them. */
function withoutKeysAddedSince(values: Values, earlier: Values): Values {
  const kept: Values = {};
  for (const [key, value] of Object.entries(values)) {
    const before = earlier[key];
    if (isMap(value) && Object.keys(value).length > 0) {
      kept[key] = withoutKeysAddedSince(value, isMap(before) ? before : {});
    } else if (Object.hasOwn(earlier, key)) {
      kept[key] = value;
    }
  }
  return kept;
}

async function manifests(chartDir: string, files: readonly string[], set: readonly string[]): Promise<unknown[]> {
  const args = ['template', 'sy', chartDir, '--namespace', 'switchyard'];
  for (const f of files) args.push('-f', f);
  for (const s of set) args.push('--set', s);
  const { stdout } = await run(helm, args, { maxBuffer: 16 << 20 });
  return parseAllDocuments(stdout)
    .map((d) => d.toJSON() as unknown)
    .filter((m) => m !== null);
}

for (const chart of ['gateway', 'scheduler', 'runtime'] as const) {
  describe(`charts/${chart}: helm upgrade --reuse-values from an earlier chart`, { skip }, () => {
    const firstReleaseFile = join(root, `test/charts/values-first-release-${chart}.yaml`);
    const firstRelease = parse(readFileSync(firstReleaseFile, 'utf8')) as Values;
    const current = parse(readFileSync(join(root, `charts/${chart}/values.yaml`), 'utf8')) as Values;
    const productionFile = join(root, `test/charts/values-production-${chart}.yaml`);
    const production = parse(readFileSync(productionFile, 'utf8')) as Values;
    let dir = '';

    /** A copy of the chart whose values.yaml is `values`, as --reuse-values renders it. */
    const chartWith = (name: string, values: Values): string => {
      const copy = join(dir, name, chart);
      cpSync(join(root, 'charts', chart), copy, { recursive: true });
      writeFileSync(join(copy, 'values.yaml'), stringify(values));
      return copy;
    };
    before(() => {
      dir = mkdtempSync(join(tmpdir(), 'switchyard-reuse-values-'));
    });
    after(() => {
      if (dir) rmSync(dir, { recursive: true, force: true });
    });

    const first = { name: 'its first release', values: firstRelease, installedWith: [firstReleaseFile] };
    // A release in between, as the templates see it: a map it has lacks the keys added to that map since
    // (serviceMonitor without tlsConfig, auth without scopeClaims); here every map lacks them at once.
    const between = {
      name: 'a release lacking the keys added since the first',
      values: withoutKeysAddedSince(current, firstRelease),
      installedWith: [],
    };
    const asTheyAre = { name: 'as they are', files: [], set: {} };
    // Partial maps (serviceMonitor without interval, directListener without port) the templates must complete.
    const featuresOn = {
      name: 'with newer features turned on in the upgrade (production values)',
      files: [productionFile],
      set: production,
    };
    const cases = [
      [first, asTheyAre],
      [first, featuresOn],
      [between, featuresOn],
    ] as const;
    cases.forEach(([release, upgrade], i) => {
      it(`renders the values of ${release.name} ${upgrade.name} as a plain install of them would`, async () => {
        const reused = chartWith(String(i), release.values);
        const off = OFF_WHEN_MISSING[chart]!.filter((key) => !Object.hasOwn(upgrade.set, key));
        const [actual, expected] = await Promise.all([
          manifests(reused, upgrade.files, []),
          manifests(
            join(root, 'charts', chart),
            [...release.installedWith, ...upgrade.files],
            off.map((key) => `${key}=null`),
          ),
        ]);
        assert.deepEqual(actual, expected);
      });
    });

    it('fills in the keys added since the first release before every template reads its values', () => {
      const templates = join(root, 'charts', chart, 'templates');
      // Helpers (_*.tpl) aside, at any depth: the test hooks are in templates/tests/.
      const files = readdirSync(templates, { recursive: true, withFileTypes: true })
        .filter((entry) => entry.isFile() && !entry.name.startsWith('_'))
        .map((entry) => relative(templates, join(entry.parentPath, entry.name)));
      for (const file of files) {
        const firstLine = readFileSync(join(templates, file), 'utf8').split('\n', 1)[0];
        assert.equal(firstLine, `{{- include "${chart}.fillAddedValues" . -}}`, file);
      }
    });
  });
}
