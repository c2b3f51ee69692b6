import { spawn, type ChildProcess } from 'node:child_process';
import type { Socket } from 'node:net';

/**
 * The reaper's script: it lists the groups named on its stdin (`+pgid`,
 * `-pgid`), and once stdin ends sends SIGTERM to those still listed and
 * SIGKILL a second later. An empty list ends it at once.
 */
const SCRIPT = `groups=' '
while IFS= read -r line; do
  case $line in
    +*) groups="$groups\${line#+} " ;;
    -*) g=" \${line#-} "; case $groups in *"$g"*) groups="\${groups%%"$g"*} \${groups#*"$g"}" ;; esac ;;
  esac
done
[ "$groups" = ' ' ] && exit 0
for g in $groups; do kill -s TERM -- "-$g" 2>/dev/null; done
sleep 1
for g in $groups; do kill -s KILL -- "-$g" 2>/dev/null; done`;

/** The reaper's process name (argv[0]). */
export const REAPER_NAME = 'switchyard-reaper';

/** How long releasing the last group waits for the reaper to exit. */
const REAPER_EXIT_WAIT_MS = 2_000;

/** Process groups of live stdio children, as told to the reaper. */
const listed = new Set<number>();
let reaper: ChildProcess | undefined;

/**
 * Lists the process group `pgid` (a stdio child spawned `detached`, so the
 * leader of its own group) with the reaper: a `/bin/sh` process that kills
 * the listed groups when this process dies without releasing them — SIGKILL,
 * an OOM kill, a crash, a forced exit — since its stdin, a pipe from this
 * process, then ends whatever the way this process went. The reaper runs in
 * its own session, so a signal to this process's group (Ctrl-C, a
 * supervisor) does not end it first. It is started with the first group and
 * ends with the last one released, so a process holding no child has none.
 *
 * Not guaranteed: a child that moves into another group (setsid, a daemon)
 * escapes it; a reaper killed on its own is started again (with every
 * group still listed) by the next group listed, not before.
 */
export function watchGroup(pgid: number): void {
  listed.add(pgid);
  if (reaper) tell(reaper, `+${pgid}`);
  else reaper = startReaper();
}

/**
 * Takes `pgid` off the list (the group is gone). Releasing the last group
 * ends the reaper; the promise resolves once it has exited.
 */
export async function releaseGroup(pgid: number): Promise<void> {
  if (!listed.delete(pgid) || !reaper) return;
  const current = reaper;
  tell(current, `-${pgid}`);
  if (listed.size > 0) return;
  reaper = undefined;
  current.stdin?.end();
  if (current.exitCode !== null || current.signalCode !== null) return;
  await new Promise<void>((resolve) => {
    const timer = setTimeout(resolve, REAPER_EXIT_WAIT_MS);
    timer.unref();
    current.once('exit', () => (clearTimeout(timer), resolve()));
  });
}

function startReaper(): ChildProcess {
  // Named so that ps and /proc show what it is (its argv[0]; sh reads the script from -c).
  const child = spawn('/bin/sh', ['-c', SCRIPT], {
    argv0: REAPER_NAME,
    stdio: ['pipe', 'ignore', 'ignore'],
    detached: true,
  });
  // It must not keep this process alive, nor fail it: a reaper that cannot
  // start or dies leaves the groups to close() alone.
  child.unref();
  (child.stdin as Socket | null)?.unref();
  child.stdin?.on('error', () => undefined);
  child.on('error', () => undefined);
  child.once('exit', () => {
    if (reaper === child) reaper = undefined;
  });
  tell(child, [...listed].map((g) => `+${g}`).join('\n'));
  return child;
}

function tell(child: ChildProcess, lines: string): void {
  if (child.stdin?.writable) child.stdin.write(`${lines}\n`);
}
