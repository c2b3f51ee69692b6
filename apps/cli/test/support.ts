// Helpers for driving the `switchyard` command as a real child process:
// spawn it with this Node (never through npx, whose shell survives a kill),
// read its output, and walk /proc for every process it started.
import { spawn, type ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import { readFileSync, readdirSync } from 'node:fs';
import { createRequire, enableCompileCache } from 'node:module';
import { once } from 'node:events';
import type { IncomingMessage, Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Duplex } from 'node:stream';
import { fileURLToPath } from 'node:url';
import { ManualClock } from '@switchyard/clock/testing';
import { createMemoryLock, MemoryLeaseStore } from '@switchyard/election';
import { startSchedulerReplica, type SchedulerReplica } from '@switchyard/scheduler';
import { createMetrics } from '@switchyard/service';
import { TUNNEL_UPGRADE } from '@switchyard/tunnel';
import { runJoin } from '../src/join.ts';

export const MAIN = fileURLToPath(new URL('../src/main.ts', import.meta.url));
const OUTPUT_CHARS_MAX = 1_000_000;

export interface Running {
  readonly child: ChildProcess;
  stdout(): string;
  stderr(): string;
  /** Resolves when the command has exited and its output has been read. */
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

/** Spawns `switchyard <args>` in its own process group, so cleanup can reach every descendant. */
export function spawnCli(args: readonly string[], env: Record<string, string> = {}): Running {
  const child = spawn(process.execPath, [MAIN, ...args], {
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true,
    env: { ...process.env, ...env },
  });
  let out = '';
  let err = '';
  child.stdout!.on('data', (chunk: Buffer) => void (out = (out + chunk.toString()).slice(-OUTPUT_CHARS_MAX)));
  child.stderr!.on('data', (chunk: Buffer) => void (err = (err + chunk.toString()).slice(-OUTPUT_CHARS_MAX)));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once('exit', (code, signal) => {
      // The last output may still be in the pipes at exit; 'close' comes once they are read to the end.
      // A descendant that outlived the command may hold them open, so that wait is bounded.
      const late = setTimeout(() => resolve({ code, signal }), 2000);
      child.once('close', () => (clearTimeout(late), resolve({ code, signal })));
    }),
  );
  return { child, stdout: () => out, stderr: () => err, exited };
}

/** The commands whose synopsis a help or usage text holds under its `usage:` headings, in its order. */
export const synopses = (text: string): string[] =>
  [...text.matchAll(/^usage:\n((?: {2}.*\n?)+)/gm)].flatMap((block) =>
    [...block[1]!.matchAll(/^ {2}switchyard ((?:[a-z]+ ?)+?)(?= [[<(-]|$)/gm)].map((m) => m[1]!.trim()),
  );

let cacheDirectory: string | undefined;
/** NODE_COMPILE_CACHE for a command run here; none where the cache cannot be written. */
export function compileCacheEnv(): Record<string, string> {
  // Asked once: a second enableCompileCache() answers with the per-version folder inside the first.
  cacheDirectory ??= enableCompileCache().directory ?? '';
  return cacheDirectory ? { NODE_COMPILE_CACHE: cacheDirectory } : {};
}

/**
 * Runs `switchyard <args>` to completion (bounded by `timeoutMs`), through
 * Node's compile cache: from the second run on its modules load without the
 * type stripper. spawnCli leaves the environment alone: up.test.ts starts
 * `up` through it to see that `up` hands the cache to its components itself.
 */
export async function runCli(
  args: readonly string[],
  timeoutMs = 15_000,
  env: Record<string, string> = {},
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const run = spawnCli(args, { ...compileCacheEnv(), ...env });
  const timer = setTimeout(() => run.child.kill('SIGKILL'), timeoutMs);
  const { code } = await run.exited;
  clearTimeout(timer);
  return { code, stdout: run.stdout(), stderr: run.stderr() };
}

/**
 * Kills the whole process group of a detached child, and the groups its
 * descendants lead (`up --processes` starts each component in a session of
 * its own), if anything of them is left (test cleanup). Never this process's
 * own group.
 */
export function killGroup(child: ChildProcess): void {
  const own = readStat(process.pid)?.pgid;
  const groups = new Set([child.pid!, ...descendants(child.pid!).map((d) => readStat(d.pid)?.pgid ?? d.pid)]);
  for (const group of groups) {
    if (group === own) continue;
    try {
      process.kill(-group, 'SIGKILL');
    } catch {
      // Nothing left in the group.
    }
  }
}

/** Polls until `probe` returns a truthy value, or fails naming `what`. */
export async function until<T>(what: string, probe: () => T | Promise<T>, timeoutMs = 20_000): Promise<NonNullable<T>> {
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value) return value as NonNullable<T>;
    if (performance.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

interface ProcStat {
  readonly pid: number;
  readonly ppid: number;
  readonly state: string;
  readonly pgid: number;
}

function readStat(pid: number): ProcStat | undefined {
  try {
    const text = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // The command name may contain spaces and parentheses: fields start after the last ')'.
    const fields = text.slice(text.lastIndexOf(')') + 2).split(' ');
    return { pid, state: fields[0]!, ppid: Number(fields[1]), pgid: Number(fields[2]) };
  } catch {
    return undefined;
  }
}

export interface Descendant {
  readonly pid: number;
  /** 1 for a child, 2 for a grandchild, … */
  readonly depth: number;
  /** The command line, arguments joined by spaces. */
  readonly command: string;
}

function commandOf(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').join(' ').trim();
  } catch {
    return '';
  }
}

/** Every live descendant of `root` (children, grandchildren, …), from /proc. */
export function descendants(root: number): Descendant[] {
  const children = new Map<number, number[]>();
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const stat = readStat(Number(entry));
    if (!stat) continue;
    const list = children.get(stat.ppid) ?? [];
    list.push(stat.pid);
    children.set(stat.ppid, list);
  }
  const found: Descendant[] = [];
  const queue = [{ pid: root, depth: 0 }];
  while (queue.length > 0) {
    const parent = queue.shift()!;
    for (const pid of children.get(parent.pid) ?? []) {
      const entry = { pid, depth: parent.depth + 1, command: commandOf(pid) };
      found.push(entry);
      queue.push(entry);
    }
  }
  return found;
}

/** True while `pid` exists and has not exited (a zombie has exited; only its exit status is left). */
export function alive(pid: number): boolean {
  const stat = readStat(pid);
  return stat !== undefined && stat.state !== 'Z' && stat.state !== 'X';
}

/** What `npx @modelcontextprotocol/inspector` runs, run with this Node. */
export const INSPECTOR_CLI = createRequire(import.meta.url).resolve(
  '@modelcontextprotocol/inspector/clients/launcher/build/index.js',
);

const quiet = { debug() {}, info() {}, warn() {}, error() {} };

/**
 * One scheduler replica in this process, leading on its own memory lease, for the command to talk to;
 * on a free port unless `port` is given.
 */
export function startOneReplica(
  tokens: {
    joinTokens: () => readonly string[];
    apiTokens?: () => readonly string[];
  },
  port = 0,
): Promise<SchedulerReplica> {
  return startSchedulerReplica({
    replicaId: 's0',
    advertiseUrl: 'http://127.0.0.1:{port}',
    host: '127.0.0.1',
    port,
    lock: createMemoryLock(new MemoryLeaseStore()),
    election: { leaseDurationMs: 1500, renewDeadlineMs: 1000, retryPeriodMs: 200 },
    ...tokens,
    logger: quiet,
    metrics: createMetrics('scheduler'),
  });
}

/** RFC 6455 §1.3: what a server's Sec-WebSocket-Accept is made of. */
const WEBSOCKET_GUID = '258EAFA5-E914-47DA-95CA-C5AB0DC85B11';

/**
 * Answers an upgrade (the tunnel's own, or WebSocket) with a valid 101, then closes the connection: a proxy
 * that takes the tunnel and passes it nowhere. For a server's `upgrade` event.
 */
export function acceptUpgradeAndHangUp(req: IncomingMessage, socket: Duplex): void {
  const websocket = req.headers.upgrade?.toLowerCase() === 'websocket';
  const accept = createHash('sha1').update(`${req.headers['sec-websocket-key']}${WEBSOCKET_GUID}`).digest('base64');
  const head = websocket
    ? `Upgrade: websocket\r\nSec-WebSocket-Accept: ${accept}\r\n`
    : `Upgrade: ${TUNNEL_UPGRADE}\r\n`;
  socket.on('error', () => {});
  socket.end(`HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\n${head}\r\n`);
  // Whatever the runtime sends is dropped, so its end is read and the connection closes.
  socket.resume();
}

/** A stand-in web server of a test, listening on 127.0.0.1. */
export interface Listening {
  readonly url: string;
  /** Cuts its connections and stops it. */
  close(): void;
}

/** Starts `server` on a free port of 127.0.0.1. */
export async function listening(server: Server): Promise<Listening> {
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () => {
      server.closeAllConnections();
      server.close();
    },
  };
}

/** `runtime join` run in this process by `joinInProcess`. */
export interface JoinInProcess {
  readonly clock: ManualClock;
  /** What it has written so far, line by line. */
  readonly lines: string[];
  /** Its exit code, once it has ended. */
  readonly run: Promise<number>;
  /** Its exit code, or undefined while it runs. */
  readonly code: number | undefined;
  /** Stops it as Ctrl-C does; closing the node waits on its clock, so time is moved on until it has ended. */
  stop(): Promise<number>;
}

/** `runtime join` as `rt-0` with `token` at `schedulerUrl`, in this process, on a manual clock. */
export function joinInProcess(schedulerUrl: string, token: string, waitMs: number): JoinInProcess {
  const clock = new ManualClock();
  const lines: string[] = [];
  const stopping = new AbortController();
  const options = {
    schedulerUrl,
    token,
    tokenSource: '--token',
    id: 'rt-0',
    classes: ['demo' as const],
    sandboxesMax: 1,
    waitMs,
  };
  const run = runJoin(options, { clock, write: (text) => void lines.push(text), stop: stopping.signal });
  let code: number | undefined;
  void run.then((exitCode) => (code = exitCode));
  return {
    clock,
    lines,
    run,
    get code() {
      return code;
    },
    async stop() {
      stopping.abort();
      for (let i = 0; i < 100 && code === undefined; i++) await clock.advance(1000);
      return run;
    },
  };
}

/** The /mcp URL a running `up` prints once its cluster serves, waited for up to `timeoutMs`; throws if it exits first. */
export function mcpUrlOf(up: Running, timeoutMs: number): Promise<string> {
  return until(
    'the /mcp URL on stdout',
    () => {
      if (up.child.exitCode !== null) throw new Error(`up exited early:\n${up.stderr()}`);
      return /^ {2}(http:\/\/127\.0\.0\.1:\d+\/mcp)$/m.exec(up.stdout())?.[1];
    },
    timeoutMs,
  );
}
