// A scheduler's API and join tokens read from files, as the charts mount its
// Secrets: a file that lists no usable token does not open the API to
// whoever reaches the port. One scheduler as a process, asked over loopback.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { spawnApp, until, type AppProcess } from '../support/processes.ts';

const TOKEN = 'a-long-enough-token-0123456789';

describe('a scheduler whose API token file lists no token', () => {
  let dir: string;
  let apiFile: string;
  let scheduler: AppProcess;
  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'switchyard-token-files-'));
    apiFile = join(dir, 'api-tokens');
    // Emptied by mistake, as a Secret updated with the wrong key.
    writeFileSync(apiFile, '# no tokens\n');
    scheduler = await spawnApp('scheduler', 'token-files', [
      ...['--host', '127.0.0.1', '--port', '0', '--replica-id', 'token-files'],
      ...['--join-tokens', TOKEN, '--api-token-file', apiFile],
    ]);
  });
  after(async () => {
    await scheduler?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('refuses every API caller and says why, naming the file, instead of opening the API', async () => {
    assert.equal((await fetch(`${scheduler.url}/api/runtimes`)).status, 401);
    assert.equal((await fetch(`${scheduler.url}/healthz`)).status, 200, 'probes stay open');
    const warning = await scheduler.waitForLog((l) => l.file === apiFile);
    assert.equal(warning.level, 40, 'a warning');
    assert.match(String(warning.msg), /refuses every caller/);
    assert.equal(scheduler.logs.filter((l) => /API is open/.test(String(l.msg))).length, 0);
  });

  it('lets callers presenting a token in once the file lists it, without a restart', async () => {
    writeFileSync(apiFile, `${TOKEN}\n`);
    const ask = (): Promise<Response> =>
      fetch(`${scheduler.url}/api/runtimes`, { headers: { authorization: `Bearer ${TOKEN}` } });
    // The file is looked at again at most once a second.
    await until('the token in the file is taken', async () => (await ask()).status === 200);
    assert.equal((await fetch(`${scheduler.url}/api/runtimes`)).status, 401, 'still none without it');
  });
});
