import { z } from 'zod';
import type { McpServer, ServerContext } from '@modelcontextprotocol/server';
import { Throttle, sleep, type Clock } from '@switchyard/clock';
import { DeathFlag, type Engine, type EngineContext, type SandboxInstance } from './engine.ts';

/** Interval between `sleep` progress notifications. */
const SLEEP_PROGRESS_MS = 100;
/** Longest `sleep` accepted, so a call cannot pin a sandbox for ever. */
const SLEEP_MS_MAX = 600_000;

function text(value: string): { content: { type: 'text'; text: string }[] } {
  return { content: [{ type: 'text', text: value }] };
}

/**
 * A cancelled call is told at info at most once in this long (per class),
 * the others at debug: clients cancel as often as they like, and the
 * runtime's `tool_calls_cancelled_total` metric counts them all.
 */
const CANCELLED_LOG_INTERVAL_MS = 10_000;

/**
 * The demo tools of the builtin engine — a contract relied on outside the
 * repository (design brief §10): `echo`, `whoami`, `counter`, `sleep`.
 */
export function builtinEngine(clock: Clock): Engine {
  const cancelled = new Throttle(clock, CANCELLED_LOG_INTERVAL_MS);
  return { create: async (ctx) => new BuiltinInstance(ctx, clock, cancelled) };
}

class BuiltinInstance implements SandboxInstance {
  readonly capabilities = { tools: { listChanged: true } };
  readonly #ctx: EngineContext;
  readonly #clock: Clock;
  readonly #cancelled: Throttle;
  readonly #death = new DeathFlag();
  #sandboxId = '';
  #counter = 0;

  constructor(ctx: EngineContext, clock: Clock, cancelled: Throttle) {
    this.#ctx = ctx;
    this.#clock = clock;
    this.#cancelled = cancelled;
  }

  get dead(): boolean {
    return this.#death.dead;
  }

  onDead(listener: () => void): void {
    this.#death.onDead(listener);
  }

  bind(sandboxId: string): void {
    this.#sandboxId = sandboxId;
  }

  register(server: McpServer): () => void {
    const tools = [
      server.registerTool(
        'echo',
        { description: 'Returns the text it is given.', inputSchema: z.object({ text: z.string() }) },
        ({ text: t }) => text(t),
      ),
      server.registerTool('whoami', { description: 'Names the runtime, sandbox and class serving the call.' }, () =>
        text(JSON.stringify({ runtime: this.#ctx.runtimeId, sandbox: this.#sandboxId, class: this.#ctx.className })),
      ),
      server.registerTool('counter', { description: 'A per-sandbox counter, +1 per call.' }, () =>
        text(String(++this.#counter)),
      ),
      server.registerTool(
        'sleep',
        {
          description: 'Sleeps, reporting progress every 100 ms; honours cancellation.',
          inputSchema: z.object({ ms: z.number().int().min(0).max(SLEEP_MS_MAX) }),
        },
        async ({ ms }, ctx) => this.#sleep(ms, ctx),
      ),
    ];
    return () => {
      for (const t of tools) t.remove();
    };
  }

  async #sleep(ms: number, ctx: ServerContext): Promise<ReturnType<typeof text>> {
    const token = ctx.mcpReq._meta?.progressToken;
    const signal = ctx.mcpReq.signal;
    let elapsedMs = 0;
    try {
      while (elapsedMs < ms) {
        const stepMs = Math.min(SLEEP_PROGRESS_MS, ms - elapsedMs);
        await sleep(this.#clock, stepMs, signal);
        elapsedMs += stepMs;
        if (token !== undefined) {
          await ctx.mcpReq.notify({
            method: 'notifications/progress',
            params: { progressToken: token, progress: elapsedMs, total: ms },
          });
        }
      }
    } catch (error) {
      // The signal also fires after a normal completion; only an abort
      // while still sleeping is a cancellation.
      if (signal.aborted) {
        this.#logCancelled('sleep');
        this.#ctx.onCancelled('sleep');
      }
      throw error;
    }
    return text(`slept ${ms}`);
  }

  #logCancelled(tool: string): void {
    const fields = { event: 'tool.cancelled', tool, sandbox: this.#sandboxId };
    const unlogged = this.#cancelled.pass(tool);
    if (unlogged === undefined) this.#ctx.logger.debug(fields, 'tool call cancelled');
    else this.#ctx.logger.info({ ...fields, ...(unlogged ? { unlogged } : {}) }, 'tool call cancelled');
  }

  async destroy(): Promise<void> {
    // Nothing to free: the counter goes with the object.
  }
}
