// The image's install without Docker (none runs here): the files the
// Dockerfile copies (as `.dockerignore` leaves them), installed as it does
// (`npm ci --omit=dev --ignore-scripts`) in a folder of their own, then each
// app loaded once to fill a module compile cache, as the image's last step
// does, and a cluster started from that folder answering MCP through its
// gateway with NODE_ENV=production. A package the apps need at run time but
// that only a devDependency brought into this checkout fails here. What it
// does not check: the base image and its Node (the pinned Node runs the
// apps), file ownership and the read-only cache.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { cpSync, mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { promisify } from 'node:util';
import { after, before, describe, it } from 'node:test';
import { startCluster, type TestCluster } from '../support/cluster.ts';
import { connect, textOf } from '../e2e/support.ts';

const run = promisify(execFile);
const ROOT = join(import.meta.dirname, '../..');
const escape = (text: string): string => text.replace(/[.+?^$(){}|[\]\\]/g, '\\$&');
// What `.dockerignore` keeps out of the copied folders: its patterns for a name at any depth (`*` matching anything).
const IGNORED = readFileSync(join(ROOT, '.dockerignore'), 'utf8')
  .split('\n')
  .map((line) => line.trim())
  .filter((line) => line.startsWith('**/'))
  .map((line) => new RegExp('^' + line.slice(3).split('*').map(escape).join('.*') + '$'));
const APPS = ['scheduler', 'gateway', 'runtime'] as const;

describe('the production install (the image without Docker)', () => {
  const dir = mkdtempSync(join(tmpdir(), 'switchyard-image-'));
  const cache = join(dir, '.node-compile-cache');
  const env = { NODE_ENV: 'production', NODE_COMPILE_CACHE: cache };
  let cluster: TestCluster | undefined;

  before(async () => {
    for (const file of ['package.json', 'package-lock.json']) cpSync(join(ROOT, file), join(dir, file));
    for (const folder of ['libs', 'apps']) {
      cpSync(join(ROOT, folder), join(dir, folder), {
        recursive: true,
        filter: (source) => !IGNORED.some((pattern) => pattern.test(basename(source))),
      });
    }
    // From npm's cache when it holds every package (it does after the
    // checkout's own install); the registry otherwise.
    await run('npm', ['ci', '--omit=dev', '--ignore-scripts', '--no-audit', '--no-fund', '--prefer-offline'], {
      cwd: dir,
      timeout: 300_000,
    });
  });

  after(async () => {
    await cluster?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('holds no devDependency and no test folder', () => {
    const installed = new Set(readdirSync(join(dir, 'node_modules')));
    for (const dev of ['typescript', 'eslint', 'prettier', 'node', 'fast-check']) {
      assert.equal(installed.has(dev), false, `${dev} is a devDependency`);
    }
    const withTests = ['libs', 'apps'].flatMap((folder) =>
      readdirSync(join(dir, folder))
        .filter((pkg) => readdirSync(join(dir, folder, pkg)).includes('test'))
        .map((pkg) => `${folder}/${pkg}`),
    );
    assert.deepEqual(withTests, [], 'test folders are left out of the image (.dockerignore)');
  });

  it('loads every app (`--help`), filling the module compile cache as the image does', async () => {
    for (const app of APPS) {
      const { stdout } = await run(process.execPath, [join(dir, 'apps', app, 'src', 'main.ts'), '--help'], {
        cwd: dir,
        env: { ...process.env, ...env },
        timeout: 60_000,
      });
      assert.match(stdout, /--/, `${app} --help printed its options`);
    }
    assert.ok(readdirSync(cache).length > 0, 'the compile cache holds entries');
  });

  it('runs a cluster that answers a tool call through its gateway', async () => {
    cluster = await startCluster({ root: dir, env, schedulers: 1, runtimes: 1, gateways: 1 });
    const client = await connect('v2', cluster.gatewayUrl());
    try {
      const result = await client.callTool({ name: 'echo', arguments: { text: 'from the image' } });
      assert.equal(textOf(result), 'from the image');
    } finally {
      await client.close();
    }
  });
});
