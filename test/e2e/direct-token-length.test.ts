// The runtime's direct-listener tokens (directListen.token and the lines of
// directListen.tokenFile) may be as short as a character, where schedulers
// and gateways hold their own to 16. Refusing a short one would cut off
// deployments that run with it, so the runtime takes it and warns: at start,
// and each time it reads a changed token file, naming the option (and the
// file), never the token. A runtime process whose scheduler is never
// reached; requests to its direct listener on loopback.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { spawnApp, type AppProcess } from '../support/processes.ts';

const INLINE = 'inl-9f3k';
const FILE_SHORT = 'fil-7q2z';
const FILE_SHORTER = 'fl2-x8';
const LONG = 'a-long-enough-direct-token-0123456789';

describe('a runtime whose direct-listener tokens are shorter than 16 characters', () => {
  let dir: string;
  let file: string;
  let runtime: AppProcess;
  let direct: string;
  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'switchyard-direct-tokens-'));
    file = join(dir, 'direct-tokens');
    writeFileSync(file, `${FILE_SHORT}\n${LONG}\n`);
    runtime = await spawnApp('runtime', 'rt-direct-token-length', [
      ...['--runtime-id', 'rt-direct-token-length', '--scheduler-url', 'http://127.0.0.1:1'],
      ...['--join-token', 'a-join-token-0123456789abcdef', '--drain-delay-ms', '0'],
      ...['--direct-listen.enabled', 'true', '--direct-listen.host', '127.0.0.1', '--direct-listen.port', '0'],
      ...['--direct-listen.token', INLINE, '--direct-listen.token-file', file],
    ]);
    direct = String((await runtime.waitForLog((l) => l.msg === 'ready')).direct);
  });
  after(async () => {
    await runtime?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  /** The status of a request to the direct listener presenting `token`. */
  const statusWith = async (token: string): Promise<number> => {
    const res = await fetch(`${direct}/mcp`, { headers: { authorization: `Bearer ${token}` } });
    await res.arrayBuffer();
    return res.status;
  };

  it('warns at start of each, naming the option and the file, never the token', async () => {
    const inline = await runtime.waitForLog((l) => l.option === 'directListen.token');
    assert.equal(inline.level, 40, 'a warning');
    assert.match(String(inline.msg), /^directListen\.token is shorter than 16 characters/);
    const fromFile = await runtime.waitForLog((l) => l.option === 'directListen.tokenFile');
    assert.equal(fromFile.level, 40, 'a warning');
    assert.equal(fromFile.file, file);
    assert.equal(fromFile.count, 1);
  });

  it('takes them still, and warns again when it reads the file changed', async () => {
    assert.notEqual(await statusWith(INLINE), 401);
    assert.notEqual(await statusWith(FILE_SHORT), 401);
    writeFileSync(file, `${FILE_SHORT}\n${FILE_SHORTER}\n${LONG}\n`);
    utimesSync(file, new Date(), new Date(Date.now() + 5000));
    // The file is looked at, at most once a second, when a request asks for the tokens.
    const fromFile = (l: Record<string, unknown>): boolean => l.option === 'directListen.tokenFile' && l.count === 2;
    for (let i = 0; i < 50 && !runtime.logs.some(fromFile); i++) {
      await statusWith(LONG);
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
    await runtime.waitForLog(fromFile, 1000);
    assert.notEqual(await statusWith(FILE_SHORTER), 401);
    const warnings = runtime.logs.filter((l) => String(l.option).startsWith('directListen.token'));
    assert.equal(warnings.length, 3, 'once at start for each, once for the change');
    const logged = JSON.stringify(runtime.logs);
    for (const token of [INLINE, FILE_SHORT, FILE_SHORTER, LONG]) assert.ok(!logged.includes(token), 'no token logged');
  });
});
