// The libraries table of docs/architecture.md is the libraries: it has a
// row for each folder under libs/, and what a row says its lib may import
// covers every dependency of that lib's package.json (a lib of the table:
// `protocol` is @switchyard/protocol; "the libs above": any of them; "MCP
// SDK v2": @modelcontextprotocol/server, /client and /node).
import { it } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';

const root = join(import.meta.dirname, '../..');
const LIBS = readdirSync(join(root, 'libs')).sort();
const SDK_V2 = ['@modelcontextprotocol/server', '@modelcontextprotocol/client', '@modelcontextprotocol/node'];

/** lib → what its row says it may import, as written. */
function table(): Map<string, string> {
  const doc = readFileSync(join(root, 'docs/architecture.md'), 'utf8');
  return new Map([...doc.matchAll(/^\| `([a-z]+)` +\| [^|]+\| ([^|]+?) +\|$/gm)].map((m) => [m[1]!, m[2]!]));
}

/** Whether `dependency` is one the words of a row allow. */
function allows(written: string, dependency: string): boolean {
  if (written === '—') return false;
  // "zod only (no `node:`)": the parenthesis says what is left out.
  const names = written
    .replace(/\([^)]*\)/g, '')
    .replace(/\bonly\b/g, '')
    .split(',')
    .map((n) => n.trim());
  return names.some(
    (n) =>
      n === dependency ||
      (LIBS.includes(n) && dependency === `@switchyard/${n}`) ||
      (n === 'MCP SDK v2' && SDK_V2.includes(dependency)) ||
      (n === 'the libs above' && dependency.startsWith('@switchyard/')),
  );
}

it('reads the table (the check below has something to compare)', () => {
  assert.ok(allows('protocol, clock, ws', '@switchyard/clock') && !allows('protocol, clock, ws', 'undici'));
  assert.ok(allows('zod only (no `node:`)', 'zod') && !allows('zod only (no `node:`)', 'node:'));
});

it('docs/architecture.md has a row for every lib', () => {
  assert.deepEqual([...table().keys()].sort(), LIBS);
});

it('each lib depends only on what its row in docs/architecture.md says it may import', () => {
  const rows = table();
  const wrong = [];
  for (const lib of LIBS) {
    const pkg = JSON.parse(readFileSync(join(root, 'libs', lib, 'package.json'), 'utf8')) as {
      dependencies?: Record<string, string>;
    };
    for (const dependency of Object.keys(pkg.dependencies ?? {})) {
      if (!allows(rows.get(lib) ?? '—', dependency)) wrong.push(`${lib}: ${dependency} (row: ${rows.get(lib)})`);
    }
  }
  assert.deepEqual(wrong, []);
});
