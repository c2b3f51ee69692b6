// The tables of `switchyard status` and `explain`: one row per runtime (or
// stage), columns as wide as their widest cell.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { table } from '../src/table.ts';

describe('table', () => {
  it('pads each column to its widest cell and trims the line ends', () => {
    assert.equal(
      table(
        ['ID', 'STATE'],
        [
          ['rt-10', 'up'],
          ['r', 'draining'],
        ],
      ),
      'ID     STATE\nrt-10  up\nr      draining',
    );
  });

  it('renders a fleet of 300,000 runtimes', () => {
    const rows = Array.from({ length: 300_000 }, (_, i) => [`rt-${i}`, 'available']);
    const lines = table(['RUNTIME', 'STATE'], rows).split('\n');
    assert.equal(lines.length, rows.length + 1);
    assert.equal(lines.at(-1), 'rt-299999  available');
  });
});
