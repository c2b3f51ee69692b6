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

describe('gateway config: identity strategies', () => {
  it('takes a chain of strategies', () => {
    const value = 'header:Mcp-Param-Sandbox,query:sandbox,path:process,principal';
    assert.equal(load({ SWITCHYARD_IDENTITY_PROCESS: value }).identity.process, value);
  });

  // A client's copy of a header Switchyard sets is stripped before it goes on: read here, it would be trusted.
  it('refuses at start a header no client may name a sandbox by, and a path parameter there is not', () => {
    for (const value of ['header:X-Switchyard-Principal', 'header:X-Tenant,header:Connection', 'path:sandbox']) {
      assert.throws(
        () => load({ SWITCHYARD_IDENTITY_PROCESS: value }),
        (error: unknown) => {
          assert.ok(error instanceof ConfigError, String(error));
          assert.match(error.problems.join('\n'), /identity\.process/);
          return true;
        },
        value,
      );
    }
  });
});
