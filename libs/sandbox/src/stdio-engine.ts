import type { Clock } from '@switchyard/clock';
import { getDefaultEnvironment } from '@modelcontextprotocol/client/stdio';
import { ChildTransport } from './child-transport.ts';
import { ExitedError, type Engine, type ExitCause } from './engine.ts';
import { ProxyInstance, connectUpstream, upstreamClient } from './proxy.ts';
import { StderrBudget, logStderr, type StderrTail } from './stderr-log.ts';
import type { EngineConfig } from './types.ts';

type StdioConfig = Extract<EngineConfig, { engine: 'stdio' }>;

/**
 * Spawns the configured stdio MCP server per sandbox and re-exposes it.
 * stderr lines go to the log, rate-limited per class (see StderrBudget). When the
 * child exits on its own the instance is dead, and its exit code or signal
 * and last stderr lines are its `exitCause`; a child that exits before it
 * is ready fails the start with them (ExitedError), as does one that does not
 * answer `initialize` within `startTimeoutSeconds`. `destroy` closes stdin, then
 * signals the child's process group: SIGTERM, then SIGKILL (ChildTransport).
 * Lists are served from cache while the child announces list changes: its
 * announcements share the pipe with its answers, so none can be missed.
 */
export function stdioEngine(config: StdioConfig, startTimeoutSeconds: number, clock: Clock): Engine {
  const stderrBudget = new StderrBudget(clock);
  return {
    async create(ctx) {
      let tail: StderrTail | undefined;
      const transport = new ChildTransport({
        command: config.command,
        args: config.args ?? [],
        env: { ...getDefaultEnvironment(), ...config.env },
        ...(config.cwd !== undefined && { cwd: config.cwd }),
        stderr: (stream, pid) =>
          (tail = logStderr(stream, { className: ctx.className, pid }, ctx.logger, stderrBudget)),
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
      return new ProxyInstance(client, transport, () => transport.close(), { cacheLists: true, exitCause });
    },
  };
}
