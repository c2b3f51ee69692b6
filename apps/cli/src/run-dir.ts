/**
 * The directory `up --processes` keeps its lease file and runtime config in,
 * under the temp folder, and the removal of those whose `up` is gone. `up`
 * removes its own when it stops; killed outright (SIGKILL, the OOM killer) it
 * cannot, so the next `up` does. An owner file marks each directory as an
 * `up`'s and names it: its pid and, where /proc tells them, the process's
 * start time (pids are reused), the boot (pids restart) and the pid namespace
 * (a temp folder shared with a container holds pids this one cannot look up).
 * Not removed, ever: a directory whose owner may still run, one without an
 * owner file of ours, one of another user, a symbolic link.
 */
import {
  existsSync,
  lstatSync,
  mkdtempSync,
  readFileSync,
  readdirSync,
  readlinkSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const PREFIX = 'switchyard-';
const OWNER_FILE = 'owner.json';
/** What an owner file says it is: a file of the same name written by anything else is not read as one. */
const OWNER_KIND = 'switchyard up';
/** An owner file is a hundred bytes or so; a bigger one is not ours. */
const OWNER_BYTES_MAX = 4096;
/** Directories looked at by one start; any beyond wait for the next one. */
const RUN_DIRS_CHECKED_MAX = 1000;

interface Owner {
  readonly kind: typeof OWNER_KIND;
  readonly pid: number;
  readonly start?: string;
  readonly boot?: string;
  readonly pidNamespace?: string;
}

function read(path: string): string | undefined {
  try {
    return readFileSync(path, 'utf8');
  } catch {
    return undefined;
  }
}

/** The start time of process `pid` in clock ticks since boot (field 22 of its stat), from `proc`. */
function startTime(pid: number | 'self', proc: string): string | undefined {
  const stat = read(join(proc, String(pid), 'stat'));
  // The command name may hold spaces and parentheses: the fields after it start past the last ')'.
  return stat?.slice(stat.lastIndexOf(')') + 2).split(' ')[19];
}

function bootId(proc: string): string | undefined {
  return read(join(proc, 'sys/kernel/random/boot_id'))?.trim();
}

function pidNamespace(proc: string): string | undefined {
  try {
    return readlinkSync(join(proc, 'self/ns/pid'));
  } catch {
    return undefined;
  }
}

/** Whether any process has `pid`: one of another user exists too (EPERM). */
function pidExists(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code !== 'ESRCH';
  }
}

/** Whether the `up` named by `owner` has ended for sure; when it cannot tell, false. */
export function ownerGone(owner: Owner, proc = '/proc'): boolean {
  const boot = bootId(proc);
  if (owner.boot !== undefined && boot !== undefined && owner.boot !== boot) return true;
  if (owner.pidNamespace !== pidNamespace(proc)) return false;
  // Without /proc (or a start time), a pid in use may be the owner's or a reuse of it: only a free one is sure.
  if (owner.start === undefined || !existsSync(join(proc, 'self/stat'))) return !pidExists(owner.pid);
  return startTime(owner.pid, proc) !== owner.start;
}

/** The owner file of `dir` when it is a directory of this user and the file one an `up` wrote. */
function ownerOf(dir: string): Owner | undefined {
  try {
    const stat = lstatSync(dir);
    if (!stat.isDirectory() || (process.getuid && stat.uid !== process.getuid())) return undefined;
    const file = join(dir, OWNER_FILE);
    const fileStat = lstatSync(file);
    if (!fileStat.isFile() || fileStat.size > OWNER_BYTES_MAX) return undefined;
    const owner = JSON.parse(readFileSync(file, 'utf8')) as Partial<Owner> | null;
    const optional = (value: unknown): boolean => value === undefined || typeof value === 'string';
    const ours =
      owner?.kind === OWNER_KIND &&
      Number.isInteger(owner.pid) &&
      owner.pid! > 0 &&
      optional(owner.start) &&
      optional(owner.boot) &&
      optional(owner.pidNamespace);
    return ours ? (owner as Owner) : undefined;
  } catch {
    return undefined;
  }
}

/** A new directory under `parent`, marked as this process's. */
export function createRunDir(parent = tmpdir(), proc = '/proc'): string {
  const dir = mkdtempSync(join(parent, PREFIX));
  const owner = {
    kind: OWNER_KIND,
    pid: process.pid,
    start: startTime('self', proc),
    boot: bootId(proc),
    pidNamespace: pidNamespace(proc),
  };
  try {
    writeFileSync(join(dir, OWNER_FILE), `${JSON.stringify(owner)}\n`);
  } catch (error) {
    rmSync(dir, { recursive: true, force: true });
    throw error;
  }
  return dir;
}

/** Removes the directories under `parent` whose `up` has ended for sure; returns their paths. */
export function removeAbandonedRunDirs(parent = tmpdir(), proc = '/proc'): string[] {
  let names: string[];
  try {
    names = readdirSync(parent).filter((name) => name.startsWith(PREFIX));
  } catch {
    return [];
  }
  const removed: string[] = [];
  for (const name of names.slice(0, RUN_DIRS_CHECKED_MAX)) {
    const dir = join(parent, name);
    const owner = ownerOf(dir);
    if (!owner || !ownerGone(owner, proc)) continue;
    try {
      rmSync(dir, { recursive: true, force: true });
      removed.push(dir);
    } catch {
      // Left as it is: a file in it that this user may not remove.
    }
  }
  return removed;
}
