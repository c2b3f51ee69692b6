import { createInterface } from 'node:readline';
import type { Readable } from 'node:stream';
import { StdioClientTransport, getDefaultEnvironment } from '@modelcontextprotocol/client/stdio';
import type { Engine } from './engine.ts';
import { ProxyInstance, upstreamClient } from './proxy.ts';
import type { EngineConfig } from './types.ts';

type StdioConfig = Extract<EngineConfig, { engine: 'stdio' }>;

/** Longest stderr line logged, characters; longer lines are cut. */
const STDERR_LINE_MAX = 2048;

/**
 * Spawns the configured stdio MCP server per sandbox and re-exposes it.
 * stderr lines go to the log. When the child exits on its own the instance
 * is dead. `destroy` closes stdin, then SIGTERM, then SIGKILL (SDK transport).
 * Lists are served from cache while the child announces list changes: its
 * announcements share the pipe with its answers, so none can be missed.
 */
export function stdioEngine(config: StdioConfig): Engine {
  return {
    async create(ctx) {
      const transport = new StdioClientTransport({
        command: config.command,
        args: [...(config.args ?? [])],
        env: { ...getDefaultEnvironment(), ...config.env },
        ...(config.cwd !== undefined && { cwd: config.cwd }),
        stderr: 'pipe',
      });
      const stderr = transport.stderr;
      if (stderr) {
        const lines = createInterface({ input: stderr as Readable, crlfDelay: Infinity });
        // A stdio MCP server's log goes to stderr (the protocol has stdout):
        // informational as often as not, so no warning.
        lines.on('line', (line) =>
          ctx.logger.info(
            { event: 'sandbox.stderr', class: ctx.className, line: line.slice(0, STDERR_LINE_MAX) },
            'stderr',
          ),
        );
      }
      const client = upstreamClient();
      try {
        await client.connect(transport);
      } catch (error) {
        await transport.close().catch(() => undefined);
        throw error;
      }
      return new ProxyInstance(client, transport, () => transport.close(), { cacheLists: true });
    },
  };
}
