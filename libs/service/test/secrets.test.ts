import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { secretSource } from '@switchyard/service';

describe('secretSource', () => {
  const dir = mkdtempSync(join(tmpdir(), 'secrets-'));
  after(() => rmSync(dir, { recursive: true, force: true }));

  it('returns the inline values when no file is named', () => {
    assert.deepEqual(secretSource(['a'], undefined)(), ['a']);
  });

  it('adds the file lines, skipping blanks and comments', () => {
    const file = join(dir, 'tokens');
    writeFileSync(file, 'one\n\n# note\n two \n');
    assert.deepEqual(secretSource(['inline'], file)(), ['inline', 'one', 'two']);
  });

  it('re-reads the file after it changes, looking no more often than every recheckMs', () => {
    const file = join(dir, 'rotating');
    writeFileSync(file, 'old\n');
    let clock = 0;
    const source = secretSource([], file, { recheckMs: 1000, now: () => clock });
    const first = source();
    assert.deepEqual(first, ['old']);
    writeFileSync(file, 'new\n');
    utimesSync(file, new Date(), new Date(Date.now() + 5000));
    clock = 999;
    assert.equal(source(), first, 'not looked at again yet');
    clock = 1000;
    assert.deepEqual(source(), ['new']);
    clock = 5000;
    const unchanged = source();
    clock = 9000;
    assert.equal(source(), unchanged, 'same list while the file is unchanged');
  });

  it('leaves out lines shorter than lengthMin, and names the file once per change', () => {
    const file = join(dir, 'short');
    writeFileSync(file, 'long-enough\nshort\n');
    let clock = 0;
    const told: Array<[string, number]> = [];
    const source = secretSource(['inline'], file, {
      now: () => clock,
      lengthMin: 6,
      onShort: (path, count) => told.push([path, count]),
    });
    assert.deepEqual(source(), ['inline', 'long-enough']);
    clock = 5000;
    assert.deepEqual(source(), ['inline', 'long-enough']);
    assert.deepEqual(told, [[file, 1]], 'told once while the file is unchanged');
    writeFileSync(file, 'tiny\nwee\nlong-enough\n');
    utimesSync(file, new Date(), new Date(Date.now() + 5000));
    clock = 10_000;
    assert.deepEqual(source(), ['inline', 'long-enough']);
    assert.deepEqual(told, [
      [file, 1],
      [file, 2],
    ]);
  });

  it('keeps lines shorter than lengthAdvised, and tells onShortKept of them once per change of the file', () => {
    const file = join(dir, 'advised');
    writeFileSync(file, 'tiny\nlong-enough\n');
    let clock = 0;
    const told: [string, number][] = [];
    const source = secretSource(['in'], file, {
      now: () => clock,
      lengthAdvised: 6,
      onShortKept: (path, count) => told.push([path, count]),
    });
    assert.deepEqual(source(), ['in', 'tiny', 'long-enough'], 'kept, the inline one too');
    clock = 5000;
    source();
    assert.deepEqual(told, [[file, 1]], 'told once while the file is unchanged; not of the inline value');
    writeFileSync(file, 'tiny\nwee\n');
    utimesSync(file, new Date(), new Date(Date.now() + 5000));
    clock = 10_000;
    assert.deepEqual(source(), ['in', 'tiny', 'wee']);
    writeFileSync(file, 'long-enough\n');
    utimesSync(file, new Date(), new Date(Date.now() + 10_000));
    clock = 15_000;
    source();
    assert.deepEqual(told, [
      [file, 1],
      [file, 2],
    ]);
  });

  it('falls back to the inline values when the file is missing', () => {
    assert.deepEqual(secretSource(['x'], join(dir, 'absent'))(), ['x']);
  });
});
