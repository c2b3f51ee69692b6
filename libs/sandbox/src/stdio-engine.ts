import type { Clock } from '@switchyard/clock';
import { getDefaultEnvironment } from '@modelcontextprotocol/client/stdio';
import { ChildTransport, STDIN_STALL_MS, type StdinTrouble } from './child-transport.ts';
import { ClassTroubleLog } from './class-trouble-log.ts';
import { ExitedError, type Engine, type ExitCause } from './engine.ts';
import { ProxyInstance, connectUpstream, upstreamClient } from './proxy.ts';
import { StderrBudget, logStderr, type StderrTail } from './stderr-log.ts';
import type { EngineConfig, SandboxTrouble } from './types.ts';

type StdioConfig = Extract<EngineConfig, { engine: 'stdio' }>;

/** How much of a skipped stdout line is logged, characters: enough to tell what wrote it. */
const SKIPPED_LINE_CHARS_MAX = 512;

/**
 * Spawns the configured stdio MCP server per sandbox and re-exposes it.
 * stderr lines go to the log, rate-limited per class (see StderrBudget); a
 * stdout line that is no JSON-RPC message is skipped and warned of as a
 * class's other trouble is (ClassTroubleLog). When the
 * child exits on its own the instance is dead, and its exit code or signal
 * and last stderr lines are its `exitCause`; a child that exits before it
 * is ready fails the start with them (ExitedError), as does one that does not
 * answer `initialize` within `startTimeoutSeconds`. `destroy` closes stdin, then
 * signals the child's process group: SIGTERM, then SIGKILL (ChildTransport).
 * Lists are served from cache while the child announces list changes: its
 * announcements share the pipe with its answers, so none can be missed.
 * A child that stops reading its stdin has what is sent to it refused once
 * its backlog is past a cap, and is stopped when it stays stuck (see
 * ChildTransport); both are warned of as a class's other trouble is, and
 * each is told to `onTrouble`.
 */
export function stdioEngine(
  config: StdioConfig,
  startTimeoutSeconds: number,
  clock: Clock,
  onTrouble: (trouble: SandboxTrouble, className: string) => void,
): Engine {
  const stderrBudget = new StderrBudget(clock);
  let trouble: ClassTroubleLog | undefined;
  return {
    async create(ctx) {
      trouble ??= new ClassTroubleLog(ctx.logger, clock);
      const stdinTrouble = (kind: StdinTrouble, backlogBytes: number, pid: number): void => {
        onTrouble(`stdin_${kind}`, ctx.className);
        trouble!.warn(
          { event: `sandbox.stdin_${kind}`, class: ctx.className, pid, backlogBytes },
          kind === 'refused'
            ? 'stdio server is not reading its input: a message to it was refused'
            : `stdio server read none of its input for ${STDIN_STALL_MS / 1000} s: it is stopped`,
        );
      };
      let tail: StderrTail | undefined;
      const transport = new ChildTransport({
        command: config.command,
        args: config.args ?? [],
        env: { ...getDefaultEnvironment(), ...config.env },
        ...(config.cwd !== undefined && { cwd: config.cwd }),
        stderr: (stream, pid) =>
          (tail = logStderr(stream, { className: ctx.className, pid }, ctx.logger, stderrBudget)),
        stdinTrouble,
        // Its logs written to stdout instead of stderr, most often: they would otherwise vanish without a word.
        skipped: (line, pid) =>
          trouble!.warn(
            { event: 'sandbox.stdout_skipped', class: ctx.className, pid, line: line.slice(0, SKIPPED_LINE_CHARS_MAX) },
            'stdio server wrote a line that is no JSON-RPC message on stdout: skipped (logs belong on stderr)',
          ),
        clock,
      });
      const exitCause = (): ExitCause | undefined => {
        const exit = transport.exit;
        return exit && { ...exit, stderrTail: tail?.lines() ?? [] };
      };
      const client = upstreamClient();
      try {
        await connectUpstream(client, transport, startTimeoutSeconds);
      } catch (error) {
        // Read before close(): an exit that close() causes is no explanation.
        const exited = exitCause();
        await transport.close().catch(() => undefined);
        throw exited ? new ExitedError(exited, { cause: error }) : error;
      }
      return new ProxyInstance(client, transport, () => transport.close(), {
        cacheLists: true,
        exitCause,
        onCancelled: ctx.onCancelled,
        clock,
      });
    },
  };
}
