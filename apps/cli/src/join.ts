import { constants, hostname } from 'node:os';
import { systemClock, type Clock } from '@switchyard/clock';
import { startRuntimeNode } from '@switchyard/runtime';
import type { EngineConfig } from '@switchyard/sandbox';
import { createLogger, createMetrics } from '@switchyard/service';
import type { JoinClass } from './join-classes.ts';
import { lastingRefusal } from './join-refusals.ts';
import { FirstJoinWait } from './join-wait.ts';
import { JoinUrls } from './join-urls.ts';
import { everythingEngine } from './local-cluster.ts';
import { lineOf, parseEntry, printable, type LogEntry } from './log-lines.ts';

export interface JoinOptions {
  readonly schedulerUrl: string;
  /** More replicas, dialled in turn when a dial fails (a cluster with no Service in front of its replicas). */
  readonly fallbackSchedulerUrls?: readonly string[];
  readonly token: string;
  /** Where the token came from (`--token`, `--token-file <file>`, an environment variable), for messages. */
  readonly tokenSource: string;
  readonly id?: string;
  /** `demo` (builtin tools) and `everything` (the reference server). */
  readonly classes: readonly JoinClass[];
  /** More classes, of a runtime config file (`--config`), none named as one of `classes`. */
  readonly configClasses?: Readonly<Record<string, EngineConfig>>;
  readonly sandboxesMax: number;
  /** How long a scheduler not reached yet is dialled before the command gives up (exit 1). */
  readonly waitMs: number;
}

/** What `runtime join` takes from its surroundings; the command's own are the system clock, stderr and signals. */
export interface JoinSurroundings {
  /** The clock of the runtime and of the wait for its first join. */
  readonly clock: Clock;
  /** Where its lines go, each ending in a newline. */
  write(text: string): void;
  /**
   * Ends it, as Ctrl-C does: with exit code 0 once it has joined (it served), else with 128 + the number
   * of the signal its reason names (`SIGTERM`: 143), 130 (SIGINT's) for any other reason.
   */
  readonly stop: AbortSignal;
}

const KNOWN: Record<JoinClass, () => EngineConfig> = {
  demo: () => ({ engine: 'builtin' }),
  everything: everythingEngine,
};

/**
 * From this pino level on, an entry of the runtime's log is trouble, shown at the terminal with the tunnel
 * coming and going once it has joined (FirstJoinWait says what comes before).
 */
const WARN = 40;

/**
 * `switchyard runtime join`: a runtime on this machine, joined to a
 * scheduler, until Ctrl-C. Its log comes out as short lines, not JSON; a
 * scheduler that refuses the join token (or this runtime's description), or
 * a URL where no scheduler answers, ends it with exit code 1, since retrying
 * would not help; so does a scheduler not reached within `waitMs`. Ctrl-C
 * ends it with 0 once it has joined, else 130 (SIGTERM: 143). The join
 * token is never printed, even where what answered echoes it back.
 */
export function joinRuntime(options: JoinOptions): Promise<number> {
  const stopping = new AbortController();
  process.once('SIGINT', () => stopping.abort('SIGINT'));
  process.once('SIGTERM', () => stopping.abort('SIGTERM'));
  return runJoin(options, {
    clock: systemClock,
    write: (text) => void process.stderr.write(text),
    stop: stopping.signal,
  });
}

/** `joinRuntime` in the surroundings given. */
export async function runJoin(options: JoinOptions, around: JoinSurroundings): Promise<number> {
  const classes: Record<string, EngineConfig> = {};
  for (const name of options.classes) classes[name] = KNOWN[name]();
  Object.assign(classes, options.configClasses);
  // Whatever answered the URL may echo the request (a 400 page with its headers), and its body is shown.
  const masked = (line: string): string => line.replaceAll(options.token, '(the join token)');
  const say = (line: string): void => around.write(`switchyard: ${printable(masked(line))}\n`);
  // Made before the runtime starts: its first refusal may come before startRuntimeNode resolves.
  let code: number | undefined;
  let end: (code: number) => void = () => {};
  const ended = new Promise<number>((resolve) => (end = resolve));
  /** Ends with `code`, saying `line` first; what the runtime logs while it closes is not shown. */
  const finish = (exitCode: number, line?: string): void => {
    if (code !== undefined) return;
    code = exitCode;
    if (line !== undefined) say(line);
    end(exitCode);
  };
  const urls = new JoinUrls([options.schedulerUrl, ...(options.fallbackSchedulerUrls ?? [])]);
  const wait = new FirstJoinWait(
    urls,
    options.waitMs,
    around.clock,
    (line) => code === undefined && say(line),
    (line) => finish(1, line),
  );
  /** The URL given whose replica holds (or last held) the tunnel, as its `tunnel connected` line names it. */
  let upAt = urls.label;
  const onEntry = (entry: LogEntry): void => {
    if (entry.msg === 'tunnel connected') upAt = urls.given(entry.url);
    if (code !== undefined) return;
    const refusal = lastingRefusal(entry, urls.given(entry.url), options.tokenSource);
    if (refusal !== undefined) return finish(1, refusal);
    const failed = wait.lineFor(entry);
    if (failed !== undefined) return void (failed && say(failed));
    // Given several URLs, a redial may have gone to a fallback: named as the join line names its URL.
    if (entry.msg === 'tunnel connected') return say(`tunnel connected to ${upAt}`);
    // The runtime's line names no URL: the tunnel lost is the one its last connect line named.
    if (entry.msg === 'tunnel disconnected') return say(lineOf({ ...entry, msg: `tunnel disconnected from ${upAt}` }));
    if ((entry.level ?? 0) >= WARN) say(lineOf(entry));
  };
  const logger = createLogger({
    name: 'runtime',
    level: 'info',
    destination: { write: (line: string) => onEntry(parseEntry(line)) },
  });
  const runtimeId = options.id ?? hostname();
  let joined = false;
  say(`runtime ${runtimeId} dialling ${urls.label} (Ctrl-C to stop)`);
  const node = await startRuntimeNode({
    runtimeId,
    schedulerUrl: options.schedulerUrl,
    fallbackSchedulerUrls: options.fallbackSchedulerUrls ?? [],
    joinToken: options.token,
    classes,
    sandboxesMax: options.sandboxesMax,
    sessionIdleMs: 30 * 60_000,
    logger,
    metrics: createMetrics('runtime'),
    clock: around.clock,
    onTunnelEvent: (event) => {
      wait.onTunnel(event);
      // A tunnel coming up is no join (a proxy may take the upgrade and drop it): a scheduler watching it is.
      if (event.type === 'watched' && !joined && code === undefined) {
        joined = true;
        say(`runtime ${runtimeId} joined ${upAt}`);
      }
    },
  });
  // Stopped before it joined, it did not do what it was run for: a script or supervisor must not take
  // that for success, and a shell reports a command a signal ended as 128 + the signal's number.
  let stopped = false;
  const stop = (): void => {
    if (code !== undefined) return;
    stopped = true;
    finish(joined ? 0 : 128 + (signalNumber(around.stop.reason) ?? constants.signals.SIGINT));
  };
  if (around.stop.aborted) stop();
  around.stop.addEventListener('abort', stop, { once: true });
  const exitCode = await ended;
  wait.close();
  await node.close();
  if (stopped) say(`runtime ${node.runtimeId} stopped${joined ? '' : ' before it joined'}`);
  return exitCode;
}

/** The number of the signal `name` names (`SIGTERM`: 15), if it names one. */
function signalNumber(name: unknown): number | undefined {
  const signals: Record<string, number> = constants.signals;
  return typeof name === 'string' && Object.hasOwn(signals, name) ? signals[name] : undefined;
}
