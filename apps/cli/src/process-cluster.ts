import { spawn, type ChildProcess } from 'node:child_process';
import { rmSync, writeFileSync } from 'node:fs';
import { enableCompileCache } from 'node:module';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import {
  LOCAL_IDENTITY,
  LOCAL_ORIGINS,
  localRuntimeSettings,
  othersAfter,
  waitForEpochs,
  type Component,
  type LocalCluster,
  type LocalClusterOptions,
} from './local-cluster.ts';
import { newJoinToken } from './join-token.ts';
import { lineOf, type LogEntry } from './log-lines.ts';
import { createRunDir } from './run-dir.ts';

const APPS = fileURLToPath(new URL('../../', import.meta.url));

interface Started {
  readonly name: string;
  readonly child: ChildProcess;
  readonly ready: { port?: number; url?: string };
}

/** pino's numeric level of `warn`, the default: quieter lines of children are not echoed. */
const WARN = 40;
const LEVELS: Record<string, number> = { fatal: 60, error: 50, warn: 40, info: 30, debug: 20 };

/**
 * The apps load their modules through Node's compile cache (its default
 * place, or NODE_COMPILE_CACHE): from the second start on without the type
 * stripper, so each is ready sooner and holds 15–30 MB less. Left out where
 * the cache cannot be written; NODE_DISABLE_COMPILE_CACHE turns it off.
 */
function compileCacheEnv(): Record<string, string> {
  const { directory } = enableCompileCache();
  return directory ? { NODE_COMPILE_CACHE: directory } : {};
}

/**
 * The environment of each app: this one's without its SWITCHYARD_*
 * variables. The apps take every setting from their flags here, as the
 * in-process cluster does; a shell's variables are for other things (the
 * CLI's own SWITCHYARD_API_TOKEN, a deployment's settings), and an app
 * refuses a SWITCHYARD_* name it does not know.
 */
function appEnv(): NodeJS.ProcessEnv {
  const env = Object.fromEntries(Object.entries(process.env).filter(([name]) => !name.startsWith('SWITCHYARD_')));
  return { ...env, ...compileCacheEnv() };
}

/**
 * Starts one app as its own OS process and resolves on its `ready` log line.
 * Lines at the chosen level or above are echoed to stderr, prefixed by name.
 * The app logs at info at least, as its `ready` line is what is waited for.
 */
function startApp(name: string, app: string, args: string[], echoLevel: number): Promise<Started> {
  const appLevel = echoLevel < LEVELS.info! ? 'debug' : 'info';
  const child = spawn(process.execPath, [join(APPS, app, 'src/main.ts'), ...args, '--log-level', appLevel], {
    // Its own session, so a terminal's Ctrl-C (SIGINT to the foreground process group) reaches `up`
    // alone, which stops the components in order, one signal each. The IPC channel is how a component
    // learns that `up` is gone, however it ended (SIGKILL too): its lifecycle then shuts it down.
    stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
    detached: true,
    env: appEnv(),
  });
  return new Promise((resolve, reject) => {
    const lines = createInterface({ input: child.stdout! });
    const echo = (line: string): void => void process.stderr.write(`  [${name}] ${line}\n`);
    createInterface({ input: child.stderr! }).on('line', echo);
    const timer = setTimeout(() => reject(new Error(`${name} did not become ready within 20 s`)), 20_000);
    child.once('exit', (code) => reject(new Error(`${name} exited (${code}) before it was ready`)));
    lines.on('line', (line) => {
      let entry: LogEntry & { port?: number };
      try {
        entry = JSON.parse(line) as typeof entry;
      } catch {
        return echo(line);
      }
      // As the in-process cluster echoes its entries: with the detail that explains a warning.
      if ((entry.level ?? 0) >= echoLevel) echo(entry.msg === undefined ? line : lineOf(entry));
      if (entry.msg === 'ready') {
        clearTimeout(timer);
        resolve({
          name,
          child,
          ready: { ...(entry.port ? { port: entry.port } : {}), ...(entry.url ? { url: entry.url } : {}) },
        });
      }
    });
  });
}

type Kind = Component['kind'];

function kindOf(name: string): Kind {
  return name.startsWith('scheduler') ? 'scheduler' : name.startsWith('runtime') ? 'runtime' : 'gateway';
}

/**
 * Front to back: the gateway stops taking clients, then the runtimes end their sandboxes and
 * tunnels while the schedulers still hold them, then the schedulers release their lease.
 */
const STOP_ORDER: readonly Kind[] = ['gateway', 'runtime', 'scheduler'];
const STOP_TIMEOUT_MS = 5000;

/** SIGTERM, SIGKILL after STOP_TIMEOUT_MS; says so on stderr unless the app exited 0 (its clean shutdown). */
function stopOne({ name, child }: Started): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise<void>((resolve) => {
    let killed = false;
    const kill = setTimeout(() => ((killed = true), child.kill('SIGKILL')), STOP_TIMEOUT_MS);
    child.once('exit', (code, signal) => {
      clearTimeout(kill);
      const why = killed
        ? `killed after ${STOP_TIMEOUT_MS / 1000} s`
        : signal
          ? `signal ${signal}`
          : `exit code ${code}`;
      if (code !== 0) process.stderr.write(`  [${name}] did not stop cleanly (${why})\n`);
      resolve();
    });
    child.kill('SIGTERM');
  });
}

async function stop(started: readonly Started[]): Promise<void> {
  for (const kind of STOP_ORDER) await Promise.all(started.filter((s) => kindOf(s.name) === kind).map(stopOne));
}

/** Writes the config file of the local runtimes into `dir`, and returns its path. */
export function writeRuntimeConfig(dir: string): string {
  const file = join(dir, 'runtime.json');
  writeFileSync(file, JSON.stringify(localRuntimeSettings()));
  return file;
}

/**
 * The local cluster as separate OS processes (`switchyard up --processes`):
 * the replicas elect through a lease file, so they behave as in a real
 * cluster, and any one of them can be killed to watch the failover.
 */
export async function startProcessCluster(options: LocalClusterOptions): Promise<LocalCluster> {
  // Marked as this run's: an `up` killed before it could remove it has the next `up` remove it.
  const dir = createRunDir();
  const token = newJoinToken();
  // The replicas' own: the runtimes' join token admits no peer to their epoch sync.
  const peerToken = newJoinToken();
  const echoLevel = LEVELS[options.logLevel] ?? WARN;
  const started: Started[] = [];
  // An exit without close() (an error, a second Ctrl-C) does not wait for the components.
  const killAll = (): void => {
    started.forEach(({ child }) => child.kill('SIGKILL'));
    rmSync(dir, { recursive: true, force: true });
  };
  process.once('exit', killAll);
  const close = async (): Promise<void> => {
    await stop(started);
    process.off('exit', killAll);
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    const schedulerUrls: string[] = [];
    for (let i = 0; i < options.schedulers; i++) {
      const port = options.schedulerPort === 0 ? 0 : options.schedulerPort + i;
      const s = await startApp(
        `scheduler-${i}`,
        'scheduler',
        [
          ...['--host', '127.0.0.1', '--port', String(port), '--replica-id', `scheduler-${i}`],
          ...['--election.backend', 'file', '--election.lease-file', join(dir, 'lease.json')],
          ...['--election.lease-duration-ms', '3000', '--election.renew-deadline-ms', '2000'],
          ...['--election.retry-period-ms', '500', '--join-tokens', token, '--drain-delay-ms', '0'],
          ...['--peer-tokens', peerToken],
        ],
        echoLevel,
      );
      started.push(s);
      schedulerUrls.push(s.ready.url!);
      options.progress(`scheduler-${i} (pid ${s.child.pid}) listening on ${s.ready.url}`);
    }
    const config = writeRuntimeConfig(dir);
    for (let i = 0; i < 2; i++) {
      const r = await startApp(
        `runtime-${i}`,
        'runtime',
        [
          ...[
            '--config',
            config,
            '--runtime-id',
            `runtime-${i}`,
            '--scheduler-url',
            schedulerUrls[i % schedulerUrls.length]!,
            // No Service here: the other replicas are where a runtime goes when its own is gone.
            '--fallback-scheduler-urls',
            othersAfter(schedulerUrls, i).join(','),
          ],
          ...['--join-token', token, '--drain-delay-ms', '0'],
        ],
        echoLevel,
      );
      started.push(r);
      options.progress(`runtime-${i} (pid ${r.child.pid}) dialling scheduler-${i % schedulerUrls.length}`);
    }
    const g = await startApp(
      'gateway',
      'gateway',
      [
        ...['--host', '127.0.0.1', '--port', String(options.gatewayPort)],
        ...['--schedulers', schedulerUrls.join(','), '--default-class', 'demo', '--drain-delay-ms', '0'],
        ...['--identity.class', LOCAL_IDENTITY.class.join(','), '--identity.process', LOCAL_IDENTITY.process.join(',')],
        ...['--allowed-origins', LOCAL_ORIGINS.join(',')],
      ],
      echoLevel,
    );
    started.push(g);
    const gatewayBase = `http://127.0.0.1:${g.ready.port}`;
    options.progress(`gateway (pid ${g.child.pid}) listening on ${gatewayBase}`);
    await waitForEpochs(schedulerUrls, 2);
    options.progress('every scheduler sees every runtime');
    return {
      gatewayUrl: `${gatewayBase}/mcp`,
      schedulerUrls,
      joinToken: token,
      components: (): Component[] =>
        started.map((s) => ({
          kind: kindOf(s.name),
          name: s.name,
          address: s.ready.url ?? (s.ready.port ? `http://127.0.0.1:${s.ready.port}` : 'tunnel'),
          note: `pid ${s.child.pid}`,
        })),
      close,
    };
  } catch (error) {
    await close();
    throw error;
  }
}
