import type { McpServer, ServerCapabilities, ServerEvent } from '@modelcontextprotocol/server';
import type { Logger } from './types.ts';

/**
 * Longest message a sandbox's server may send the runtime, bytes: a line on
 * a stdio server's stdout (the SDK's stdio transport's own bound), a JSON
 * answer or an SSE event of an http upstream. More than the 4 MiB a request
 * body may have, since answers carry more (a resource read as base64 grows
 * by a third), and the same whichever engine a class uses.
 */
export const UPSTREAM_MESSAGE_BYTES_MAX = 10 * 1024 * 1024;

/** What an engine knows when it makes an instance (before it is bound to a sandbox id). */
export interface EngineContext {
  readonly runtimeId: string;
  readonly className: string;
  readonly logger: Logger;
  /** Called when a running tool call is cancelled by its client (builtin tools, and calls proxied upstream). */
  readonly onCancelled: (tool: string) => void;
}

/**
 * One live sandbox. It serves any number of SDK servers at once (one per
 * legacy session or stateless request): `register` installs its tools,
 * resources and prompts on a server and returns a detach function.
 */
export interface SandboxInstance {
  /**
   * Capabilities a server needs before `register` (declared at construction).
   * One that declares `tools` installs them in `register` (`registerTool`, or
   * `tools/list` and `tools/call` handlers), or none: the server then lists
   * none, counted or not (see tool-calls.ts).
   */
  readonly capabilities: ServerCapabilities;
  /**
   * Optional: readies a warm-pool member before it waits in the pool, so a
   * client's first calls find the upstream loaded. Called once, before
   * `bind`; must have no effect a client could see. A failure is logged and
   * the member pooled anyway.
   */
  prime?(): Promise<void>;
  /** Binds the instance to its sandbox id; called once, before the first `register`. */
  bind(sandboxId: string): void;
  register(server: McpServer): () => void;
  /**
   * Optional: a 2026-07-28 `subscriptions/listen` stream was opened on this
   * sandbox, watching `resources`. Until the returned function is called,
   * the instance hands its change events (list changes, updates of watched
   * resources) to `publish`, once each however many streams are open:
   * `publish` reaches all of the sandbox's streams, each filtering by its
   * own request.
   */
  listen?(resources: readonly string[], publish: (event: ServerEvent) => void): () => void;
  /** True once the instance can no longer serve (e.g. its child exited). */
  readonly dead: boolean;
  /** Calls `listener` once when the instance dies on its own. */
  onDead(listener: () => void): void;
  /**
   * Optional: how the instance's process ended (stdio: exit code or signal,
   * last stderr lines), for the log of its death; undefined while it runs.
   */
  exitCause?(): ExitCause | undefined;
  /** Frees everything (children, connections). Idempotent. */
  destroy(reason: string): Promise<void>;
}

/** How a sandbox's process ended: what an operator needs to tell why it died. */
export interface ExitCause {
  readonly exitCode: number | null;
  /** The signal that ended it (`SIGKILL` for an OOM kill), or null. */
  readonly signal: string | null;
  /** Its last stderr lines (a few, each cut short), oldest first. */
  readonly stderrTail: readonly string[];
}

/** A start that failed because the process exited before it was ready. */
export class ExitedError extends Error {
  readonly exit: ExitCause;
  constructor(exit: ExitCause, options?: ErrorOptions) {
    super(`the server ${describeExit(exit)} before it was ready`, options);
    this.exit = exit;
  }
}

/** `exited with code 3`, `killed by SIGKILL`. */
export function describeExit(exit: ExitCause): string {
  return exit.signal !== null ? `was killed by ${exit.signal}` : `exited with code ${exit.exitCode}`;
}

/** Log fields of a start failure: how the process ended, when it did. */
export function exitFields(error: unknown): Partial<ExitCause> {
  if (!(error instanceof ExitedError)) return {};
  const { exitCode, signal, stderrTail } = error.exit;
  return { exitCode, signal, stderrTail };
}

/** Makes sandbox instances of one class. */
export interface Engine {
  create(ctx: EngineContext): Promise<SandboxInstance>;
  /** Releases engine-wide resources (e.g. a warm pool). Idempotent. */
  close?(): Promise<void>;
}

/** Shared plumbing for the "dies once" part of an instance. */
export class DeathFlag {
  #dead = false;
  #listeners: (() => void)[] = [];

  get dead(): boolean {
    return this.#dead;
  }

  onDead(listener: () => void): void {
    if (this.#dead) queueMicrotask(listener);
    else if (this.#listeners.length < 16) this.#listeners.push(listener);
  }

  /** Marks dead and notifies once; later calls do nothing. */
  kill(): void {
    if (this.#dead) return;
    this.#dead = true;
    const listeners = this.#listeners;
    this.#listeners = [];
    for (const l of listeners) l();
  }
}
