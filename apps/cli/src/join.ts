import { hostname } from 'node:os';
import { startRuntimeNode } from '@switchyard/runtime';
import type { EngineConfig } from '@switchyard/sandbox';
import { createLogger, createMetrics } from '@switchyard/service';
import type { JoinClass } from './join-classes.ts';
import { everythingEngine } from './local-cluster.ts';
import { lineOf, parseEntry, printable, type LogEntry } from './log-lines.ts';

export interface JoinOptions {
  readonly schedulerUrl: string;
  readonly token: string;
  /** Where the token came from (`--token`, `--token-file <file>`, an environment variable), for messages. */
  readonly tokenSource: string;
  readonly id?: string;
  /** `demo` (builtin tools) and `everything` (the reference server); use switchyard-runtime for more. */
  readonly classes: readonly JoinClass[];
  readonly sandboxesMax: number;
}

const KNOWN: Record<JoinClass, () => EngineConfig> = {
  demo: () => ({ engine: 'builtin' }),
  everything: everythingEngine,
};

const WARN = 40;
/** What a person at the terminal wants to see of the runtime's log: its tunnel coming and going, and trouble. */
const SHOWN = new Set(['tunnel connected', 'tunnel disconnected']);

/**
 * What a scheduler's 400 says is wrong with this runtime. The dialer logs the
 * refusal's body as it came, JSON text (`{"error", "field", "detail"}`,
 * docs/protocol.md §1); the detail names the field and the rule it broke.
 */
function refusalReason(body: string | undefined): string {
  try {
    const parsed = JSON.parse(body ?? '') as { error?: unknown; detail?: unknown };
    if (typeof parsed.error === 'string') {
      return typeof parsed.detail === 'string' ? `${parsed.error} (${parsed.detail})` : parsed.error;
    }
  } catch {
    // Not JSON (a proxy's page): shown as it came.
  }
  return body?.trim() || '(no reason given)';
}

/**
 * `switchyard runtime join`: a runtime on this machine, joined to a
 * scheduler, until Ctrl-C. Its log comes out as short lines, not JSON; a
 * scheduler that refuses the join token (or this runtime's description)
 * ends it with exit code 1, since retrying would not help.
 */
export async function joinRuntime(options: JoinOptions): Promise<number> {
  const classes: Record<string, EngineConfig> = {};
  for (const name of options.classes) classes[name] = KNOWN[name]();
  const say = (line: string): void => void process.stderr.write(`switchyard: ${printable(line)}\n`);
  let refused: (reason: string) => void = () => {};
  const onEntry = (entry: LogEntry): void => {
    if (entry.msg === 'scheduler refused the tunnel' && (entry.status === 401 || entry.status === 400)) {
      const why =
        entry.status === 401
          ? `the join token (check ${options.tokenSource})`
          : `this runtime: ${refusalReason(entry.body)}`;
      return refused(`${options.schedulerUrl} refused ${why}`);
    }
    if (SHOWN.has(entry.msg ?? '') || (entry.level ?? 0) >= WARN) say(lineOf(entry));
  };
  const logger = createLogger({
    name: 'runtime',
    level: 'info',
    destination: { write: (line: string) => onEntry(parseEntry(line)) },
  });
  const node = await startRuntimeNode({
    runtimeId: options.id ?? hostname(),
    schedulerUrl: options.schedulerUrl,
    joinToken: options.token,
    classes,
    sandboxesMax: options.sandboxesMax,
    sessionIdleMs: 30 * 60_000,
    logger,
    metrics: createMetrics('runtime'),
  });
  say(`runtime ${node.runtimeId} dialling ${options.schedulerUrl} (Ctrl-C to stop)`);
  const code = await new Promise<number>((resolve) => {
    refused = (reason) => {
      say(reason);
      resolve(1);
    };
    process.once('SIGINT', () => resolve(0));
    process.once('SIGTERM', () => resolve(0));
  });
  await node.close();
  if (code === 0) say(`runtime ${node.runtimeId} stopped`);
  return code;
}
