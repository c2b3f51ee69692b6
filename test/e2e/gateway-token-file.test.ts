// A gateway's client bearer tokens read from auth.tokensFile are held to the
// length of those given inline (16 characters): a short line is left out,
// with a warning that names the file. A gateway as a process; its scheduler
// is never reached, so a token it takes gets as far as scheduling (503).
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { spawnApp, type AppProcess } from '../support/processes.ts';
import { initializeBody, post, type RawReply } from './support.ts';

const SHORT = 'short-token';
const LONG = 'a-long-enough-token-0123456789';

describe('a gateway whose auth.tokensFile holds a token shorter than 16 characters', () => {
  let dir: string;
  let file: string;
  let gateway: AppProcess;
  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'switchyard-gateway-tokens-'));
    file = join(dir, 'client-tokens');
    writeFileSync(file, `${SHORT}\n${LONG}\n`);
    gateway = await spawnApp('gateway', 'gw-length-check', [
      ...['--host', '127.0.0.1', '--port', '0', '--schedulers', 'http://127.0.0.1:1'],
      ...['--auth.mode', 'bearer', '--auth.tokens-file', file],
    ]);
  });
  after(async () => {
    await gateway?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  const initialize = (token: string): Promise<RawReply> =>
    post(`http://127.0.0.1:${gateway.port}/mcp`, initializeBody(1, '2025-06-18'), { authorization: `Bearer ${token}` });

  it('refuses the short token (401) and takes the long one', async () => {
    assert.equal((await initialize(SHORT)).status, 401);
    const taken = await initialize(LONG);
    assert.equal(taken.status, 503, 'past authentication, to a scheduler that does not answer');
  });

  it('warns at start, naming the file, and never logs the token', async () => {
    const warning = await gateway.waitForLog((l) => l.file === file);
    assert.equal(warning.level, 40, 'a warning');
    assert.equal(warning.option, 'auth.tokensFile');
    assert.equal(warning.count, 1);
    assert.ok(!JSON.stringify(gateway.logs).includes(SHORT), 'the short token is not logged');
  });
});

// The token a gateway presents, read from schedulerTokenFile or
// upstreamTokenFile: one that is no usable token is reported at start, and
// the report names the file to mend (the option alone does not: it may be
// given inline instead).
describe('a gateway whose schedulerTokenFile and upstreamTokenFile hold no usable token', () => {
  let dir: string;
  let schedulerFile: string;
  let upstreamFile: string;
  let gateway: AppProcess;
  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'switchyard-gateway-tokens-'));
    schedulerFile = join(dir, 'scheduler-token');
    upstreamFile = join(dir, 'upstream-token');
    writeFileSync(schedulerFile, `${SHORT}\n`);
    writeFileSync(upstreamFile, '');
    gateway = await spawnApp('gateway', 'gw-token-files', [
      ...['--host', '127.0.0.1', '--port', '0', '--schedulers', 'http://127.0.0.1:1'],
      ...['--scheduler-token-file', schedulerFile, '--upstream-mode', 'direct', '--upstream-token-file', upstreamFile],
    ]);
  });
  after(async () => {
    await gateway?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('says so at start, at error level, naming each file and never the token', async () => {
    const scheduler = await gateway.waitForLog((l) => l.option === 'schedulerToken');
    assert.equal(scheduler.level, 50, 'an error');
    assert.equal(scheduler.file, schedulerFile);
    assert.equal(
      scheduler.msg,
      `schedulerToken from ${schedulerFile} has a token that is not at least 16 visible ASCII characters: requests to schedulers go without one`,
    );
    const upstream = await gateway.waitForLog((l) => l.option === 'upstreamToken');
    assert.equal(upstream.level, 50, 'an error');
    assert.equal(upstream.file, upstreamFile);
    assert.equal(upstream.msg, `upstreamToken from ${upstreamFile} has no token: requests to runtimes go without one`);
    assert.ok(!JSON.stringify(gateway.logs).includes(SHORT), 'the short token is not logged');
  });
});
