// docs/configuration.md is generated from the app config schemas; this fails
// when someone changes a schema without regenerating it (npm run docs:config).
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';

const root = join(import.meta.dirname, '../..');
const run = promisify(execFile);

describe('docs/configuration.md', () => {
  it('matches what the schemas generate', async () => {
    const { stdout } = await run(process.execPath, [join(root, 'scripts/gen-config-docs.ts'), '--stdout'], {
      cwd: root,
    });
    const committed = readFileSync(join(root, 'docs/configuration.md'), 'utf8');
    assert.equal(committed, stdout, 'docs/configuration.md is stale: run npm run docs:config');
  });

  const expected = [
    {
      row: '`election.leaseName`',
      mentions: ['SWITCHYARD_ELECTION_LEASE_NAME', '--election.lease-name', '"switchyard-scheduler"'],
    },
    { row: '`joinTokens`', mentions: ['SWITCHYARD_JOIN_TOKENS', 'Secret'] },
    { row: '`routeCache.redisUrl`', mentions: ['SWITCHYARD_ROUTE_CACHE_REDIS_URL', 'Secret'] },
    { row: '`bodyBytesMax`', mentions: ['4194304'] },
    { row: '`classes`', mentions: ['SWITCHYARD_CLASSES', 'map (JSON in env/flags)', '"builtin"'] },
    { row: '`directListen.token`', mentions: ['SWITCHYARD_DIRECT_LISTEN_TOKEN', 'Secret'] },
  ];
  const doc = readFileSync(join(root, 'docs/configuration.md'), 'utf8');
  for (const e of expected) {
    it(`documents ${e.row} with its env name, flag, default and secrecy`, () => {
      const line = doc.split('\n').find((l) => l.startsWith(`| ${e.row} `));
      assert.ok(line, `row ${e.row}`);
      for (const m of e.mentions) assert.ok(line.includes(m), `${m} in ${line}`);
    });
  }
});
