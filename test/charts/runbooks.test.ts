// Each alert of the charts' PrometheusRules has a runbook in docs/operations.md,
// under "Runbooks", headed by the alert's name; with
// prometheusRule.runbookBaseUrl set (the URL the operator hosts that page at),
// each alert's runbook_url annotation is that URL plus `#` plus the heading's
// anchor as GitHub renders it, so a notification links to its runbook. Rendered
// with the real helm binary.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { chartRenderer, root, type Manifest } from './helm.ts';

const { skip, render } = chartRenderer('chart runbook tests');

type Rule = { alert: string; annotations: Record<string, string> };
type RuleManifest = Manifest & { spec: { groups: { rules: Rule[] }[] } };

/**
 * The anchor GitHub gives a heading: its text lower-cased, inline-code marks and punctuation (all but letters,
 * digits, `_`, `-` and spaces) dropped, spaces made `-`; the second heading of one anchor gets `-1`, the third `-2`.
 */
function githubAnchors(markdown: string): { heading: string; level: number; anchor: string }[] {
  const seen = new Map<string, number>();
  const anchors = [];
  let fenced = false;
  for (const line of markdown.split('\n')) {
    if (line.startsWith('```')) fenced = !fenced;
    const m = fenced ? null : /^(#{1,6}) (.+?)\s*$/.exec(line);
    if (!m) continue;
    const slug = m[2]!
      .replaceAll('`', '')
      .toLowerCase()
      .replace(/[^\p{L}\p{M}\p{N}_ -]/gu, '')
      .replaceAll(' ', '-');
    const count = seen.get(slug) ?? 0;
    seen.set(slug, count + 1);
    anchors.push({ heading: m[2]!, level: m[1]!.length, anchor: count === 0 ? slug : `${slug}-${count}` });
  }
  return anchors;
}

const headings = githubAnchors(readFileSync(join(root, 'docs/operations.md'), 'utf8'));
/** The headings of the Runbooks section: those below it, up to the next heading of its level or above. */
const runbooks = (() => {
  const start = headings.findIndex((h) => h.heading === 'Runbooks');
  if (start < 0) return [];
  const level = headings[start]!.level;
  const end = headings.findIndex((h, i) => i > start && h.level <= level);
  return headings.slice(start + 1, end < 0 ? undefined : end);
})();

const BASE = 'https://git.example.com/acme/switchyard/blob/v1.4.0/docs/operations.md';

it('reads GitHub anchors as GitHub writes them (the checks below compare the right names)', () => {
  assert.deepEqual(
    githubAnchors(
      '## Probes and drain\n### `switchyard status`, in 2 s\n```\n# not a heading\n```\n## Probes and drain',
    ).map((h) => h.anchor),
    ['probes-and-drain', 'switchyard-status-in-2-s', 'probes-and-drain-1'],
  );
});

// With the features every alert watches: the gateway's Redis alert is rendered only with a Redis.
for (const { chart, monitor, features } of [
  { chart: 'scheduler', monitor: 'serviceMonitor.enabled=true', features: [] },
  { chart: 'gateway', monitor: 'serviceMonitor.enabled=true', features: ['redis.existingSecret=switchyard-redis'] },
  { chart: 'runtime', monitor: 'podMonitor.enabled=true', features: [] },
]) {
  describe(`charts/${chart}: runbooks`, { skip }, () => {
    const on = ['prometheusRule.enabled=true', monitor, ...features];
    const rules = async (set: readonly string[]): Promise<Rule[]> =>
      (await render(chart, undefined, [...on, ...set]))
        .filter((m): m is RuleManifest => m.kind === 'PrometheusRule')
        .flatMap((m) => m.spec.groups.flatMap((g) => g.rules));

    it('has a runbook for each alert in docs/operations.md, under Runbooks, headed by its name', async () => {
      const rendered = await rules([]);
      assert.ok(rendered.length >= 5, `${rendered.length} alerts`);
      const headed = new Set(runbooks.map((h) => h.heading));
      for (const { alert } of rendered) assert.ok(headed.has(alert), `no runbook headed ${alert}`);
    });

    it("links each alert to its runbook with prometheusRule.runbookBaseUrl: runbook_url is the base, #, its heading's anchor", async () => {
      for (const { alert, annotations } of await rules([`prometheusRule.runbookBaseUrl=${BASE}`])) {
        const heading = runbooks.find((h) => h.heading === alert);
        assert.ok(heading, `no runbook headed ${alert}`);
        assert.equal(annotations.runbook_url, `${BASE}#${heading.anchor}`, alert);
        // The summary and description stay beside it.
        assert.ok(annotations.summary && annotations.description, alert);
      }
    });

    it('leaves runbook_url out while prometheusRule.runbookBaseUrl is empty (the default)', async () => {
      for (const { alert, annotations } of await rules([])) {
        assert.deepEqual(Object.keys(annotations).toSorted(), ['description', 'summary'], alert);
      }
    });

    it('refuses a base that is no http(s) URL, or that has an anchor of its own', async () => {
      for (const base of ['docs/operations.md', `${BASE}#alerts`]) {
        await assert.rejects(rules([`prometheusRule.runbookBaseUrl=${base}`]), (error: { stderr?: string }) =>
          /prometheusRule\.runbookBaseUrl: Does not match pattern/.test(error.stderr ?? ''),
        );
      }
    });
  });
}
