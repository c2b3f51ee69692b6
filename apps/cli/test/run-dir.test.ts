// Which run directories `up` removes when it starts: those whose `up` has
// ended for sure, and nothing else. Each case plants one directory, made by
// createRunDir and its owner file then changed as the case says, in a folder
// of its own, and sweeps that folder with /proc or without it.
import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createRunDir, removeAbandonedRunDirs } from '../src/run-dir.ts';

const root = mkdtempSync(join(tmpdir(), 'run-dir-test-'));
/** A /proc that is not there, as on a system without one. */
const NO_PROC = join(root, 'no-proc');
/** Above any pid_max Linux allows (2^22): no process has it. */
const FREE_PID = 2 ** 31 - 1;

type OwnerEdit = (owner: Record<string, unknown>) => unknown;

interface Case {
  readonly name: string;
  readonly edit?: OwnerEdit;
  /** The /proc the directory was made with, and the one of the sweep. */
  readonly madeWith?: string;
  readonly sweptWith?: string;
  readonly removed: boolean;
}

const CASES: Case[] = [
  { name: 'keeps the directory of an up that runs (this process)', removed: false },
  { name: 'removes one whose pid is free', edit: (o) => ({ ...o, pid: FREE_PID }), removed: true },
  {
    name: 'removes one whose pid now belongs to another process (its start time differs)',
    edit: (o) => ({ ...o, start: '1' }),
    removed: true,
  },
  { name: 'removes one of an earlier boot', edit: (o) => ({ ...o, boot: 'an-earlier-boot' }), removed: true },
  {
    name: 'keeps one of another pid namespace, whose pids cannot be looked up here',
    edit: (o) => ({ ...o, pid: FREE_PID, pidNamespace: 'pid:[1]' }),
    removed: false,
  },
  { name: 'keeps one whose owner file is not JSON', edit: () => 'someone else', removed: false },
  { name: 'keeps one whose owner file is not an up’s', edit: (o) => ({ ...o, kind: 'other' }), removed: false },
  {
    name: 'without /proc, removes one whose pid is free',
    edit: (o) => ({ ...o, pid: FREE_PID }),
    madeWith: NO_PROC,
    sweptWith: NO_PROC,
    removed: true,
  },
  {
    name: 'without /proc, keeps one whose pid is in use, which may be a reuse or the owner',
    edit: (o) => ({ ...o, pid: process.ppid }),
    madeWith: NO_PROC,
    sweptWith: NO_PROC,
    removed: false,
  },
  {
    name: 'without /proc, keeps one made where /proc was, even with a free pid',
    edit: (o) => ({ ...o, pid: FREE_PID }),
    sweptWith: NO_PROC,
    removed: false,
  },
];

/** A run directory in a folder of its own, its owner file changed by `edit`. */
function plant(edit: OwnerEdit | undefined, proc = '/proc'): { parent: string; dir: string } {
  const parent = mkdtempSync(join(root, 'case-'));
  const dir = createRunDir(parent, proc);
  if (edit) {
    const file = join(dir, 'owner.json');
    const changed = edit(JSON.parse(readFileSync(file, 'utf8')) as Record<string, unknown>);
    writeFileSync(file, typeof changed === 'string' ? changed : JSON.stringify(changed));
  }
  return { parent, dir };
}

describe('removeAbandonedRunDirs', () => {
  after(() => rmSync(root, { recursive: true, force: true }));

  for (const c of CASES) {
    it(c.name, () => {
      const { parent, dir } = plant(c.edit, c.madeWith);
      assert.deepEqual(removeAbandonedRunDirs(parent, c.sweptWith), c.removed ? [dir] : []);
      assert.equal(existsSync(dir), !c.removed);
    });
  }

  it('follows no symbolic link: the link and the directory it names stay', () => {
    const target = plant((o) => ({ ...o, pid: FREE_PID }));
    const parent = mkdtempSync(join(root, 'case-'));
    symlinkSync(target.dir, join(parent, 'switchyard-link'));
    assert.deepEqual(removeAbandonedRunDirs(parent), []);
    assert.equal(existsSync(join(parent, 'switchyard-link')), true);
    assert.equal(existsSync(target.dir), true);
  });

  it('marks its directory as this process’s', () => {
    const { dir } = plant(undefined);
    const owner = JSON.parse(readFileSync(join(dir, 'owner.json'), 'utf8')) as Record<string, unknown>;
    assert.equal(owner.pid, process.pid);
    assert.match(String(owner.start), /^\d+$/);
  });
});
