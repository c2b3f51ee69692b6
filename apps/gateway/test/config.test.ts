import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { ConfigError, loadConfig } from '@switchyard/service';
import { gatewayConfigSchema } from '../src/config.ts';

const load = (env: Record<string, string>) =>
  loadConfig(gatewayConfigSchema, { argv: [], env: { SWITCHYARD_SCHEDULERS: 'http://127.0.0.1:7070', ...env } });

describe('gateway config: defaultClass', () => {
  it('takes an identity value', () => {
    assert.equal(load({ SWITCHYARD_DEFAULT_CLASS: 'tools.v2' }).defaultClass, 'tools.v2');
  });

  // Every request naming no class is scheduled in it: one the scheduler refuses would fail them all (500).
  it('refuses at start a class that is not an identity value', () => {
    for (const value of ['my tools', 'a/b', 'x'.repeat(129)]) {
      assert.throws(
        () => load({ SWITCHYARD_DEFAULT_CLASS: value }),
        (error: unknown) => {
          assert.ok(error instanceof ConfigError, String(error));
          assert.match(error.problems.join('\n'), /defaultClass/);
          return true;
        },
      );
    }
  });
});
