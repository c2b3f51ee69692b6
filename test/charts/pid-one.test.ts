// Why the runtime chart shares the pod's process namespace
// (`shareProcessNamespace`): in its own container the runtime is PID 1,
// orphans are reparented to PID 1, and Node reaps only the children it
// spawned, so a stdio server run through a wrapper whose children outlive
// it (`sh -c 'sleep 1 & exit 0'`, some `npx` or `uvx` trees) leaves a zombie
// per orphan for the life of the pod. Shown here for real in a PID namespace
// of its own (`unshare`, which needs root; CI runs as root), with a stand-in
// that spawns as the stdio engine does; and that under an init that reaps
// (the pod's pause container when the namespace is shared; `sh` here)
// none is left.
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { describe, it } from 'node:test';

const standin = join(import.meta.dirname, 'pid-one-standin.ts');
const UNSHARE = ['--pid', '--fork', '--mount-proc'];

function unavailable(): string | false {
  if (process.getuid?.() !== 0) return 'needs root (unshare --pid)';
  const probe = spawnSync('unshare', [...UNSHARE, 'true'], { encoding: 'utf8', timeout: 10_000 });
  if (probe.error) return `unshare cannot run: ${probe.error.message}`;
  if (probe.status !== 0) return `unshare --pid fails here: ${probe.stderr.trim()}`;
  return false;
}
const skip = unavailable();
if (skip) console.log(`PID 1 tests skipped: ${skip}`);

/** Runs `command` as PID 1 of a new PID namespace; the stand-in's report. */
function inNamespace(command: string[]): { pid: number; exited: number; zombies: number } {
  const out = execFileSync('unshare', [...UNSHARE, ...command], { encoding: 'utf8', timeout: 30_000 });
  return JSON.parse(out.trim().split('\n').at(-1)!) as { pid: number; exited: number; zombies: number };
}

describe('stdio servers behind wrappers, in a PID namespace', { skip }, () => {
  it('a runtime that is PID 1 (its own container) keeps a zombie per orphan of a wrapper', () => {
    const report = inNamespace([process.execPath, standin]);
    assert.equal(report.pid, 1);
    assert.equal(report.exited, 5);
    assert.equal(report.zombies, 5, 'each wrapper left its `sleep` behind, and nobody reaped it');
  });

  it('under an init that reaps (the pause container of a shared process namespace), none is left', () => {
    // `; :` keeps sh from exec-ing node: sh stays PID 1 and waits, reaping whatever is reparented to it.
    const report = inNamespace(['/bin/sh', '-c', `"${process.execPath}" "${standin}"; :`]);
    assert.notEqual(report.pid, 1);
    assert.equal(report.exited, 5);
    assert.equal(report.zombies, 0);
  });
});
