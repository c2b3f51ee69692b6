// A default the hand-written docs give beside a config key, as
// "`bodyTimeoutMs` (60 s)", "`principalConcurrencyMax` requests (256)",
// "75 s (`keepAliveTimeoutMs`)" or "(`upstreamCheckIntervalMs`, 5 s)", is that key's default in
// docs/configuration.md (generated from the schemas; configuration.test.ts
// keeps it so), in one of the apps that have the key.
import { it } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';

const root = join(import.meta.dirname, '../..');
const DOCS = ['README.md', ...readdirSync(join(root, 'docs')).map((f) => `docs/${f}`)].filter(
  (f) => f.endsWith('.md') && f !== 'docs/configuration.md',
);
const UNIT: Record<string, number> = {
  '': 1,
  ms: 1,
  s: 1000,
  minute: 60_000,
  minutes: 60_000,
  KiB: 1024,
  MiB: 1024 ** 2,
};
const AMOUNT = String.raw`(\d[\d,]*(?:\.\d+)?)(?: ?(ms|s|minutes?|KiB|MiB))?`;

/** key → the defaults configuration.md gives it (one per app that has it), as numbers. */
function configDefaults(): Map<string, number[]> {
  const defaults = new Map<string, number[]>();
  const doc = readFileSync(join(root, 'docs/configuration.md'), 'utf8');
  for (const m of doc.matchAll(/^\| `([\w.]+)` +\|[^|]+\|[^|]+\|[^|]+\| `(-?[\d.]+)` +\|/gm)) {
    defaults.set(m[1]!, [...(defaults.get(m[1]!) ?? []), Number(m[2])]);
  }
  return defaults;
}

/** Each amount written beside a key, in either order, with where. */
function written(): { where: string; key: string; text: string; value: number }[] {
  const found = [];
  const patterns = [
    new RegExp(String.raw`\x60([\w.]+)\x60 (?:[a-z]+ ){0,3}\((?:default )?${AMOUNT}\)`, 'g'),
    new RegExp(String.raw`${AMOUNT} \(\x60([\w.]+)\x60[,)]`, 'g'),
    new RegExp(String.raw`\(\x60([\w.]+)\x60, ${AMOUNT}\)`, 'g'),
  ];
  for (const file of DOCS) {
    // Paragraphs as one line: a phrase may wrap.
    const text = readFileSync(join(root, file), 'utf8').replace(/\n(?!\n)/g, ' ');
    for (const [p, pattern] of patterns.entries()) {
      for (const m of text.matchAll(pattern)) {
        const [key, amount, unit] = p === 1 ? [m[3]!, m[1]!, m[2]] : [m[1]!, m[2]!, m[3]];
        const value = Number(amount.replaceAll(',', '')) * UNIT[unit ?? '']!;
        found.push({ where: file, key, text: m[0], value });
      }
    }
  }
  return found;
}

it('finds defaults written beside config keys (the check below has something to compare)', () => {
  const keys = configDefaults();
  const compared = written().filter((w) => keys.has(w.key));
  assert.ok(compared.length >= 10, `${compared.length} written defaults`);
});

it('a default the docs write beside a config key is the default the code gives it', () => {
  const keys = configDefaults();
  const wrong = written()
    .filter((w) => keys.has(w.key) && !keys.get(w.key)!.includes(w.value))
    .map((w) => `${w.where}: "${w.text}" but ${w.key} defaults to ${keys.get(w.key)!.join(' / ')}`);
  assert.deepEqual(wrong, []);
});
