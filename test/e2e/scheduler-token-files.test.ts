// A scheduler's API and join tokens read from files, as the charts mount its
// Secrets: a file that lists no usable token does not open the API to
// whoever reaches the port, and the tokens of a file are held to the same
// length as those given inline (16 characters): a short line is left out,
// with a warning that names the file, where the same token inline would
// stop the scheduler from starting. A scheduler as a process, asked over
// loopback; nothing here is about its shutdown, so it stops without the
// drain delay (5 s by default).
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { spawnApp, until, type AppProcess } from '../support/processes.ts';

const TOKEN = 'a-long-enough-token-0123456789';
const SHORT = 'short-token';

/** The status of an upgrade to `/api/runtime/connect` presenting `token` (401: refused; 400: taken, no runtime info). */
async function connectStatus(url: string, token: string): Promise<number> {
  const req = http.request(`${url}/api/runtime/connect`, {
    headers: { connection: 'Upgrade', upgrade: 'websocket', authorization: `Bearer ${token}` },
    signal: AbortSignal.timeout(5000),
  });
  req.end();
  const [res] = (await once(req, 'response')) as [http.IncomingMessage];
  res.resume();
  return res.statusCode!;
}

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
      ...['--host', '127.0.0.1', '--port', '0', '--replica-id', 'token-files', '--drain-delay-ms', '0'],
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

  // A Secret emptied by mistake while the replicas run: their gateways get
  // 401s from then on, and the log is where an operator looks for why.
  it('says so again when the file lists no token any more, once per change', async () => {
    const emptied = (): Record<string, unknown>[] =>
      scheduler.logs.filter((l) => l.file === apiFile && /refuses every caller/.test(String(l.msg)));
    assert.equal(emptied().length, 1, 'the warning at start');
    writeFileSync(apiFile, '');
    const ask = (): Promise<Response> =>
      fetch(`${scheduler.url}/api/runtimes`, { headers: { authorization: `Bearer ${TOKEN}` } });
    // Looked at again at most once a second; a caller makes it look.
    await until('the emptied file is read', async () => (await ask()).status === 401);
    await until('a warning naming the file', async () => (await ask(), emptied().length === 2));
    assert.equal(emptied()[1]!.level, 40, 'a warning');
    for (let i = 0; i < 3; i++) assert.equal((await ask()).status, 401);
    assert.equal(emptied().length, 2, 'not once per call');
  });
});

describe('a scheduler whose token files hold a token shorter than 16 characters', () => {
  let dir: string;
  let joinFile: string;
  let apiFile: string;
  let scheduler: AppProcess;
  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'switchyard-token-files-'));
    joinFile = join(dir, 'join-tokens');
    apiFile = join(dir, 'api-tokens');
    // The second short one is scoped to runtime ids: its line is long enough, its token is not.
    writeFileSync(joinFile, `${SHORT}\n${TOKEN}\n${SHORT} gpu-*\n`);
    writeFileSync(apiFile, `${TOKEN}\n${SHORT}\n`);
    scheduler = await spawnApp('scheduler', 'length-check', [
      ...['--host', '127.0.0.1', '--port', '0', '--replica-id', 'length-check', '--drain-delay-ms', '0'],
      ...['--join-token-file', joinFile, '--api-token-file', apiFile],
    ]);
  });
  after(async () => {
    await scheduler?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('refuses the short API token and takes the long one', async () => {
    const ask = (token: string): Promise<Response> =>
      fetch(`${scheduler.url}/api/runtimes`, { headers: { authorization: `Bearer ${token}` } });
    assert.equal((await ask(SHORT)).status, 401);
    assert.equal((await ask(TOKEN)).status, 200);
  });

  it('refuses a runtime presenting the short join token, even where a line scopes it, and admits the long one', async () => {
    assert.equal(await connectStatus(scheduler.url!, SHORT), 401);
    assert.equal(
      await connectStatus(scheduler.url!, TOKEN),
      400,
      'past the token, refused for its missing runtime info',
    );
  });

  it('warns, naming each file, and never logs the token', async () => {
    for (const [option, file] of [
      ['joinTokenFile', joinFile],
      ['apiTokenFile', apiFile],
    ] as const) {
      const warning = await scheduler.waitForLog((l) => l.file === file);
      assert.equal(warning.level, 40, 'a warning');
      assert.equal(warning.option, option);
      assert.equal(warning.count, 1);
      assert.match(String(warning.msg), /shorter than 16 characters left out/);
    }
    assert.ok(!JSON.stringify(scheduler.logs).includes(SHORT), 'the short token is not logged');
  });

  it('warns when the join token file lists none any more: no runtime can join', async () => {
    writeFileSync(joinFile, `${SHORT}\n`);
    await until('the emptied file is read', async () => (await connectStatus(scheduler.url!, TOKEN)) === 401);
    const warning = await scheduler.waitForLog((l) => l.file === joinFile && /no runtime can join/.test(String(l.msg)));
    assert.equal(warning.level, 40, 'a warning');
  });
});

describe('a scheduler whose config file lists a join token with a leading blank', () => {
  let dir: string;
  let scheduler: AppProcess;
  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'switchyard-token-files-'));
    const config = join(dir, 'scheduler.json');
    // As a YAML or JSON entry may be written; the config check reads the token past the blank.
    writeFileSync(config, JSON.stringify({ joinTokens: [`  ${TOKEN}`] }));
    scheduler = await spawnApp('scheduler', 'token-blank', [
      ...['--host', '127.0.0.1', '--port', '0', '--replica-id', 'token-blank', '--drain-delay-ms', '0'],
      ...['--config', config],
    ]);
  });
  after(async () => {
    await scheduler?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('admits a runtime presenting the token, and warns of no short one', async () => {
    assert.equal(await connectStatus(scheduler.url!, TOKEN), 400, 'taken (400: no runtime info), not refused');
    assert.equal(scheduler.logs.filter((l) => /shorter than/.test(String(l.msg))).length, 0);
  });
});
