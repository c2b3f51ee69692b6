// The benchmark report generator: which stdout lines count as figures, how a
// suite's block is rendered, and that regenerating one suite leaves the
// hand-written text and every other suite's block untouched.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { describeMachine, parseFigures, renderSuite, replaceSuiteBlock } from './report.ts';

const machine = { cores: 2, model: 'Test CPU @ 2.0GHz', memoryBytes: 4 * 1024 ** 3, node: 'v24.0.0' };

describe('parseFigures', () => {
  const cases = [
    { name: 'keeps a figure line of the suite', line: '{"bench":"s","metric":"m","value":1.5,"unit":"ms"}', kept: 1 },
    { name: 'ignores a figure of another suite', line: '{"bench":"t","metric":"m","value":1,"unit":"ms"}', kept: 0 },
    { name: 'ignores a line without a unit', line: '{"bench":"s","metric":"m","value":1}', kept: 0 },
    { name: 'ignores a non-numeric value', line: '{"bench":"s","metric":"m","value":"1","unit":"ms"}', kept: 0 },
    { name: 'ignores a non-finite value', line: '{"bench":"s","metric":"m","value":1e999,"unit":"ms"}', kept: 0 },
    { name: 'ignores progress text and broken JSON', line: 'warming up\n{"bench":"s",', kept: 0 },
  ];
  for (const c of cases) {
    it(c.name, () => assert.equal(parseFigures(`noise\n${c.line}\n`, 's').length, c.kept));
  }
});

describe('describeMachine', () => {
  it('takes the first model name of /proc/cpuinfo', () => {
    const info = 'processor\t: 0\nmodel name\t: Fast CPU\nprocessor\t: 1\nmodel name\t: Fast CPU\n';
    assert.equal(describeMachine(info, 2, 1, 'v24').model, 'Fast CPU');
  });
  it('says so when the model is unknown', () => {
    assert.equal(describeMachine('', 1, 1, 'v24').model, 'unknown CPU');
  });
});

describe('renderSuite and replaceSuiteBlock', () => {
  const figures = [
    { metric: 'decisions', value: 123456, unit: '1/s' },
    { metric: 'p|99', value: 0.123456, unit: 'ms' },
  ];
  const block = renderSuite('sched', figures, machine, '2026-01-02');

  it('renders one row per figure with the command that reproduces it', () => {
    assert.match(block, /^<!-- bench:sched:start -->/);
    assert.match(block, /<!-- bench:sched:end -->$/);
    assert.match(block, /\| decisions \| 123,456 \| 1\/s \| `npm run bench -- sched` \|/);
    assert.match(block, /\| p\\\|99 \| 0\.1235 \| ms \|/);
    assert.match(block, /Measured 2026-01-02 on 2 × Test CPU @ 2\.0GHz, 4\.0 GiB memory, Node v24\.0\.0\./);
  });

  it('appends a missing block after the intro and replaces it in place later', () => {
    const intro = '# Benchmarks\n\nHand-written intro.\n';
    const other = renderSuite('other', [{ metric: 'x', value: 1, unit: 'u' }], machine, '2026-01-01');
    const once = replaceSuiteBlock(replaceSuiteBlock(intro, 'other', other), 'sched', block);
    assert.ok(once.startsWith(intro));
    const updated = renderSuite('sched', [{ metric: 'decisions', value: 1, unit: '1/s' }], machine, '2026-02-02');
    const twice = replaceSuiteBlock(once, 'sched', updated);
    assert.ok(twice.startsWith(intro));
    assert.ok(twice.includes(other), 'the other suite block is untouched');
    assert.ok(twice.includes(updated));
    assert.ok(!twice.includes('123,456'), 'the old figures are gone');
    assert.equal(twice.match(/bench:sched:start/g)?.length, 1);
  });
});
