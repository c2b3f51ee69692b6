// `switchyard up --processes` keeps its lease file and runtime config in a
// directory of the temp folder, removed when it stops. Killed with SIGKILL,
// it removes nothing: the next `up` removes what runs that are gone left,
// and only that — not the directory of an `up` still running beside it,
// nor one that is not an `up`'s. Every `up` here has a temp folder of the
// test's own (TMPDIR), never the machine's.
import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { alive, compileCacheEnv, descendants, killGroup, mcpUrlOf, spawnCli, until, type Running } from './support.ts';

const temp = mkdtempSync(join(tmpdir(), 'up-leftovers-'));
const env = { TMPDIR: temp, ...compileCacheEnv() };

/** The run directories in the test's temp folder. */
const runDirs = (): string[] => readdirSync(temp).filter((name) => /^switchyard-/.test(name));

async function startUp(...args: string[]): Promise<Running> {
  const up = spawnCli(['up', ...args, '--gateway-port', '0', '--scheduler-port', '0'], env);
  await mcpUrlOf(up, 30_000);
  return up;
}

describe('switchyard up after an up --processes killed with SIGKILL', () => {
  const ups: Running[] = [];
  after(() => {
    ups.forEach((up) => killGroup(up.child));
    rmSync(temp, { recursive: true, force: true });
  });
  let killedDir = '';
  let runningDir = '';

  it('finds the directory the killed up left', async () => {
    const killed = await startUp('--processes');
    ups.push(killed);
    killedDir = runDirs()[0] ?? '';
    assert.ok(killedDir, 'up --processes made no directory');
    const components = descendants(killed.child.pid!).filter((d) => d.depth === 1);
    process.kill(killed.child.pid!, 'SIGKILL');
    await killed.exited;
    await until('the components of the killed up to stop', () => components.every((c) => !alive(c.pid)), 15_000);
    assert.deepEqual(runDirs(), [killedDir]);
  });

  it('removes it when it starts, says so in one line, and keeps a directory not of an up', async () => {
    const foreign = join(temp, 'switchyard-notours');
    mkdirSync(foreign);
    writeFileSync(join(foreign, 'owner.json'), 'someone else\n');
    const next = await startUp('--processes');
    ups.push(next);
    const line = `switchyard: removed 1 directory left by an up that is gone: ${join(temp, killedDir)}`;
    assert.ok(next.stderr().split('\n').includes(line), next.stderr());
    assert.equal(existsSync(join(temp, killedDir)), false);
    assert.equal(existsSync(foreign), true);
    runningDir = runDirs().find((name) => name !== 'switchyard-notours') ?? '';
    assert.ok(runningDir, 'the second up made no directory');
  });

  it('leaves the directory of an up still running alone', async () => {
    const beside = await startUp();
    ups.push(beside);
    assert.doesNotMatch(beside.stderr(), /removed/);
    assert.equal(existsSync(join(temp, runningDir)), true);
    for (const up of ups.slice(1)) {
      process.kill(-up.child.pid!, 'SIGINT');
      assert.deepEqual(await up.exited, { code: 0, signal: null }, up.stderr());
    }
    assert.deepEqual(runDirs(), ['switchyard-notours']);
  });
});
