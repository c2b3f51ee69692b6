import { ListenError } from '@switchyard/service';
import { startLocalCluster } from './local-cluster.ts';
import { startProcessCluster } from './process-cluster.ts';
import { removeAbandonedRunDirs } from './run-dir.ts';
import { table } from './table.ts';

export interface UpOptions {
  readonly processes: boolean;
  readonly gatewayPort: number;
  readonly schedulerPort: number;
  readonly logLevel: 'fatal' | 'error' | 'warn' | 'info' | 'debug';
}

/**
 * `switchyard up`: a whole cluster on this machine. Progress goes to stderr;
 * the summary (components, the gateway URL, a client configuration) to
 * stdout. Ctrl-C (or SIGTERM, or SIGHUP) stops every component, then the
 * process exits; a second one exits at once.
 */
export async function up(options: UpOptions): Promise<void> {
  const started = performance.now();
  outliveOutput();
  const progress = (line: string): void => void process.stderr.write(`  … ${line}\n`);
  const removed = removeAbandonedRunDirs();
  if (removed.length > 0) process.stderr.write(`switchyard: ${removedLine(removed)}\n`);
  process.stderr.write(
    `switchyard: starting a local cluster (3 schedulers, 1 gateway, 2 runtimes${options.processes ? ', one process each' : ', in this process'})\n`,
  );
  const settings = { ...options, schedulers: 3, progress };
  const cluster = await (options.processes ? startProcessCluster(settings) : startLocalCluster(settings)).catch(
    (error: unknown) => {
      throw withPortHint(error, options);
    },
  );
  const seconds = ((performance.now() - started) / 1000).toFixed(1);
  const rows = cluster.components().map((c) => [c.kind, c.name, c.address, c.note]);
  // The `.mcp.json` shape (Claude Code and the clients that read it), where Streamable HTTP is `http`.
  const clientConfig = { mcpServers: { switchyard: { type: 'http', url: cluster.gatewayUrl } } };
  process.stdout.write(
    [
      '',
      table(['COMPONENT', 'NAME', 'ADDRESS', 'NOTE'], rows),
      '',
      `Switchyard is ready (${seconds} s). MCP endpoint:`,
      '',
      `  ${cluster.gatewayUrl}`,
      '',
      'Classes: demo (echo, whoami, counter, sleep) and everything (the reference server);',
      'pick one with the X-Switchyard-Class header (or ?class=everything), the process with',
      'X-Switchyard-Process (or ?process=<id>).',
      '',
      'MCP client configuration (.mcp.json):',
      JSON.stringify(clientConfig, null, 2),
      '',
      `Try: npx @modelcontextprotocol/inspector --cli ${cluster.gatewayUrl} --method tools/list`,
      // Every replica: no Service spreads the dials here, and a runtime given one replica waits for it alone.
      `Join another runtime: npm run switchyard -- runtime join ${cluster.schedulerUrls.join(' ')} --token ${cluster.joinToken}`,
      'Press Ctrl-C to stop.',
      '',
    ].join('\n'),
  );
  await nextStopSignal();
  void nextStopSignal().then(() => {
    process.stderr.write('switchyard: second signal: exiting without waiting\n');
    process.exit(1);
  });
  process.stderr.write('switchyard: stopping…\n');
  await cluster.close();
  process.stderr.write('switchyard: stopped\n');
}

/**
 * A terminal that went away (or a closed pipe) fails every later write to
 * it; unheard, that error would end `up` at its next line, before it has
 * stopped the cluster. What is written then has no reader anyway.
 */
function outliveOutput(): void {
  for (const output of [process.stdout, process.stderr]) output.on('error', () => {});
}

/** Ctrl-C, a `kill`, or the terminal going away (SIGHUP), which must stop the cluster as cleanly. */
const STOP_SIGNALS = ['SIGINT', 'SIGTERM', 'SIGHUP'] as const;

function nextStopSignal(): Promise<void> {
  return new Promise((resolve) => {
    const stop = (): void => {
      for (const signal of STOP_SIGNALS) process.off(signal, stop);
      resolve();
    };
    for (const signal of STOP_SIGNALS) process.on(signal, stop);
  });
}

/** Paths shown in the line that says what was removed; the rest are counted. */
const REMOVED_SHOWN_MAX = 5;

function removedLine(dirs: readonly string[]): string {
  const more = dirs.length - REMOVED_SHOWN_MAX;
  const shown = dirs.slice(0, REMOVED_SHOWN_MAX).join(', ') + (more > 0 ? ` and ${more} more` : '');
  return dirs.length === 1
    ? `removed 1 directory left by an up that is gone: ${shown}`
    : `removed ${dirs.length} directories left by ups that are gone: ${shown}`;
}

/** A taken port names the flag that moves it: the gateway's, else one of the schedulers' consecutive ports. */
function withPortHint(error: unknown, options: UpOptions): unknown {
  if (!(error instanceof ListenError) || error.code !== 'EADDRINUSE') return error;
  const flag = error.port === options.gatewayPort ? '--gateway-port' : '--scheduler-port';
  return new Error(`${error.message}; choose another with ${flag} <port> (0 picks free ports)`, { cause: error });
}
