// A stdio class's `cwd`, as the runtime app takes it at start: a relative one
// from the runtime's own working directory, and one that names no directory
// refused before anything starts, naming the class and the path (else every
// sandbox of the class would fail to spawn, one client at a time).
import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const MAIN = fileURLToPath(new URL('../src/main.ts', import.meta.url));

/** The runtime app run in `cwd` with `args`, to its exit (bounded). */
function runRuntime(cwd: string, args: readonly string[]): Promise<{ code: number | null; out: string; err: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [MAIN, ...args], { cwd, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stdout.on('data', (chunk: Buffer) => (out += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (err += chunk.toString()));
    const timer = setTimeout(() => child.kill('SIGKILL'), 20_000);
    child.once('error', reject);
    child.once('close', (code) => {
      clearTimeout(timer);
      resolve({ code, out, err });
    });
  });
}

describe('runtime app: the cwd of a stdio class', () => {
  const dir = mkdtempSync(join(tmpdir(), 'runtime-class-cwd-'));
  after(() => rmSync(dir, { recursive: true, force: true }));
  mkdirSync(join(dir, 'tools'));
  writeFileSync(join(dir, 'plain-file'), '');
  /** A config file of one stdio class `files` run in `cwd`; where nothing listens for the scheduler. */
  const configWith = (name: string, cwd: string): string => {
    const path = join(dir, name);
    const classes = { files: { engine: 'stdio', command: 'mcp-server', cwd } };
    writeFileSync(path, JSON.stringify({ runtimeId: 'rt-cwd', schedulerUrl: 'http://127.0.0.1:1', classes }));
    return path;
  };

  it("takes a relative cwd from the runtime's working directory", async () => {
    const { code, out, err } = await runRuntime(dir, [
      '--config',
      configWith('relative.json', 'tools'),
      '--print-config',
    ]);
    assert.equal(code, 0, err);
    assert.match(out, new RegExp(`^ {4}cwd: ${join(dir, 'tools')}$`, 'm'));
  });

  for (const [what, cwd, why] of [
    ['that does not exist', 'no-such-dir', 'does not exist'],
    ['that is a file', 'plain-file', 'is not a directory'],
  ] as const) {
    it(`refuses at start a cwd ${what}, naming the class and the path`, async () => {
      const { code, err } = await runRuntime(dir, ['--config', configWith(`${cwd}.json`, cwd)]);
      assert.equal(code, 2, err);
      assert.match(err, /^switchyard-runtime: invalid configuration:$/m);
      assert.ok(
        err.includes(`  - classes.files.cwd: ${join(dir, cwd)} ${why}: class files runs its server there`),
        err,
      );
    });
  }
});
