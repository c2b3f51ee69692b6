// Starts Switchyard apps as separate OS processes for cluster, e2e and chaos
// tests. Each app is spawned with this Node (process.execPath) directly —
// never through npx, whose shell would survive a kill of its pid — and is
// considered up when it logs its `ready` line. Every process is killed when
// the test process exits or is ended by a signal, whatever happened.
import { spawn, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { compileCacheDirectory } from './compile-cache.ts';

export type AppName = 'scheduler' | 'runtime' | 'gateway';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));

/**
 * The environment that has an app load its modules through Node's compile
 * cache, as `switchyard up` starts its components: from the second start on
 * without the type stripper, so it spends about half the CPU getting ready
 * (the suite starts hundreds). Empty where the cache cannot be written;
 * NODE_DISABLE_COMPILE_CACHE turns it off.
 */
export function compileCacheEnv(): Record<string, string> {
  return compileCacheDirectory ? { NODE_COMPILE_CACHE: compileCacheDirectory } : {};
}

const LOG_LINES_MAX = 2000;
const live = new Set<ChildProcess>();
const killAll = (): void => {
  for (const child of live) child.kill('SIGKILL');
};
process.once('exit', killAll);
// A signal ends the process without 'exit' (a cancelled or interrupted test
// run): the apps go first, then the signal takes its default course.
for (const signal of ['SIGTERM', 'SIGINT', 'SIGHUP'] as const) {
  process.once(signal, () => {
    killAll();
    process.kill(process.pid, signal);
  });
}

/** Ties `child` to this process: it is killed when this one exits or a signal ends it. */
export function ownChild(child: ChildProcess): void {
  live.add(child);
  child.once('exit', () => live.delete(child));
}

export interface AppProcess {
  readonly name: string;
  readonly app: AppName;
  readonly child: ChildProcess;
  readonly pid: number;
  /** From the `ready` line: the advertised URL (scheduler) and bound port. */
  readonly url: string | undefined;
  readonly port: number | undefined;
  /** Parsed JSON log lines, newest last (bounded). */
  readonly logs: Array<Record<string, unknown>>;
  /** Resolves when the process has exited (code or signal). */
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  signal(signal: NodeJS.Signals): void;
  /** SIGTERM, then SIGKILL after `graceMs`; resolves on exit. Idempotent. */
  stop(graceMs?: number): Promise<void>;
  /** Resolves with the first log line (already seen or future) matching `predicate`. */
  waitForLog(
    predicate: (line: Record<string, unknown>) => boolean,
    timeoutMs?: number,
  ): Promise<Record<string, unknown>>;
}

export async function spawnApp(
  app: AppName,
  name: string,
  args: readonly string[],
  options: {
    env?: Record<string, string>;
    readyTimeoutMs?: number;
    /** A command that execs Node in its place (e.g. `ip netns exec <ns>`), so the pid is still Node's. */
    wrapper?: readonly string[];
    /** The tree the app runs from (a folder with `apps/` and its own `node_modules/`); default this checkout. */
    root?: string;
  } = {},
): Promise<AppProcess> {
  const main = join(options.root ?? ROOT, 'apps', app, 'src', 'main.ts');
  const command = [...(options.wrapper ?? []), process.execPath, main, ...args];
  const child = spawn(command[0]!, command.slice(1), {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...compileCacheEnv(), ...process.env, ...options.env },
  });
  ownChild(child);
  const logs: Array<Record<string, unknown>> = [];
  const waiters = new Set<{
    predicate: (l: Record<string, unknown>) => boolean;
    resolve: (l: Record<string, unknown>) => void;
  }>();
  const stderr: string[] = [];
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once('exit', (code, signal) => {
      // The last lines may still be in the pipes at exit; 'close' comes once they are read to the end.
      // A descendant that outlived the app may hold them open, so that wait is bounded.
      const late = setTimeout(() => resolve({ code, signal }), 2000);
      child.once('close', () => (clearTimeout(late), resolve({ code, signal })));
    }),
  );
  createInterface({ input: child.stderr! }).on('line', (line) => {
    stderr.push(line);
    if (stderr.length > 200) stderr.shift();
  });
  createInterface({ input: child.stdout! }).on('line', (line) => {
    let entry: Record<string, unknown>;
    try {
      entry = JSON.parse(line) as Record<string, unknown>;
    } catch {
      entry = { msg: line };
    }
    logs.push(entry);
    if (logs.length > LOG_LINES_MAX) logs.shift();
    for (const waiter of waiters) {
      if (waiter.predicate(entry)) {
        waiters.delete(waiter);
        waiter.resolve(entry);
      }
    }
  });
  const waitForLog = (predicate: (l: Record<string, unknown>) => boolean, timeoutMs = 10_000) => {
    const seen = logs.find(predicate);
    if (seen) return Promise.resolve(seen);
    return new Promise<Record<string, unknown>>((resolve, reject) => {
      const waiter = { predicate, resolve };
      waiters.add(waiter);
      const timer = setTimeout(() => {
        waiters.delete(waiter);
        reject(new Error(`${name}: no matching log line within ${timeoutMs} ms; stderr: ${stderr.join('\n')}`));
      }, timeoutMs);
      timer.unref();
      void exited.then(() => {
        if (!waiters.has(waiter)) return;
        waiters.delete(waiter);
        clearTimeout(timer);
        reject(new Error(`${name} exited before the log line; stderr: ${stderr.join('\n')}`));
      });
    });
  };
  // An app that never got ready is not left running: its pipes would keep
  // this process, and so the whole test run, alive after its tests end.
  const ready = await waitForLog((l) => l.msg === 'ready', options.readyTimeoutMs ?? 20_000).catch((error: unknown) => {
    child.kill('SIGKILL');
    throw error;
  });
  let stopping: Promise<void> | undefined;
  return {
    name,
    app,
    child,
    pid: child.pid!,
    url: typeof ready.url === 'string' ? ready.url : undefined,
    port: typeof ready.port === 'number' ? ready.port : undefined,
    logs,
    exited,
    signal: (signal) => void child.kill(signal),
    waitForLog,
    stop(graceMs = 5000) {
      stopping ??= (async () => {
        if (child.exitCode !== null || child.signalCode !== null) return;
        const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
        child.kill('SIGTERM');
        await exited;
        clearTimeout(timer);
      })();
      return stopping;
    },
  };
}

/** Polls `probe` every 25 ms until it returns a value other than undefined/false (bounded). */
export async function until<T>(
  what: string,
  probe: () => Promise<T | undefined | false> | T | undefined | false,
  timeoutMs = 10_000,
): Promise<T> {
  const deadline = performance.now() + timeoutMs;
  let lastError: unknown;
  for (;;) {
    try {
      const value = await probe();
      if (value !== undefined && value !== false) return value as T;
    } catch (error) {
      lastError = error;
    }
    if (performance.now() > deadline) {
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`, { cause: lastError });
    }
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}
