// A stand-in for the runtime in its container, for pid-one.test.ts: it
// spawns `sh -c 'sleep 0.1 & exit 0'` wrappers as the stdio engine spawns
// servers (detached, each the leader of its own group), waits until every
// process but itself has exited, and prints its pid and the zombies left in
// its PID namespace (it mounts its own /proc) as JSON.
import { spawn } from 'node:child_process';
import { readFileSync, readdirSync } from 'node:fs';

const WRAPPERS = 5;
const WAIT_MS = 5_000;

/** State letter of every other process in this namespace. */
function states(): string[] {
  const out: string[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry) || Number(entry) === process.pid) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      out.push(stat.slice(stat.lastIndexOf(')') + 2)[0]!);
    } catch {
      // Gone meanwhile.
    }
  }
  return out;
}

let exited = 0;
for (let i = 0; i < WRAPPERS; i++) {
  spawn('/bin/sh', ['-c', 'sleep 0.1 & exit 0'], { stdio: 'ignore', detached: true }).on('exit', () => exited++);
}
const deadline = performance.now() + WAIT_MS;
// Done when the wrappers have exited and nothing runs but this process (and an init above it).
const settled = () => exited === WRAPPERS && states().filter((s) => s !== 'Z').length <= (process.pid === 1 ? 0 : 1);
while (!settled() && performance.now() < deadline) await new Promise((r) => setTimeout(r, 20));
// An init that reaps does so as each orphan exits: give it a moment for the last ones.
const reaped = performance.now() + 500;
while (states().includes('Z') && performance.now() < reaped) await new Promise((r) => setTimeout(r, 20));
console.log(JSON.stringify({ pid: process.pid, exited, zombies: states().filter((s) => s === 'Z').length }));
