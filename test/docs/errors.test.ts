// The error table of docs/protocol.md §8 is the registry (`ERROR_CODES`):
// every code it names maps to the HTTP status and JSON-RPC code it gives,
// and every code of the registry has a row.
import { it } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { ERROR_CODES } from '@switchyard/protocol';

const doc = readFileSync(join(import.meta.dirname, '../../docs/protocol.md'), 'utf8');

/** `code → "status rpc"` from the rows `| \`a\`, \`b\` | 400 | -32600 |`. */
function documented(): Map<string, string> {
  const rows = new Map<string, string>();
  for (const m of doc.matchAll(/^\| ((?:`[a-z_]+`(?:, )?)+) +\| (\d{3}) +\| (-\d+) +\|$/gm)) {
    for (const [, code] of m[1]!.matchAll(/`([a-z_]+)`/g)) rows.set(code!, `${m[2]} ${m[3]}`);
  }
  return rows;
}

it('docs/protocol.md lists every registry error code with its HTTP status and JSON-RPC code', () => {
  const registry = new Map(Object.entries(ERROR_CODES).map(([code, e]) => [code, `${e.status} ${e.rpc}`]));
  assert.deepEqual(Object.fromEntries(documented()), Object.fromEntries(registry));
});
