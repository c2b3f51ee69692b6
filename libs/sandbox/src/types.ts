import type { Clock } from '@switchyard/clock';
import type { Engine } from './engine.ts';
import type { ToolCallSink } from './tool-calls.ts';

/** Minimal pino-compatible logger: `(fields, message)`. */
export interface Logger {
  info(obj: object, msg?: string): void;
  warn(obj: object, msg?: string): void;
  error(obj: object, msg?: string): void;
  debug(obj: object, msg?: string): void;
}

/**
 * Where the host reports what it holds (implemented by the runtime state
 * store). Calls are synchronous and must not throw; ordering per key is the
 * order of events (add before remove).
 */
export interface StateReporter {
  addProcess(pid: string): void;
  removeProcess(pid: string): void;
  addThread(pid: string, tid: string): void;
  removeThread(pid: string, tid: string): void;
  setIdleWeight(weight: Record<string, number>): void;
}

/** A sandbox lifecycle event for billing or audit. */
export interface MeteringEvent {
  readonly event: 'start' | 'recycle';
  readonly class: string;
  readonly process: string;
  /**
   * Why: `created`/`warm` for start; for recycle `expired` (expireSeconds after its last session left),
   * `ended` (the session or request whose own sandbox it was ended), `dead`, `deleted`, `closed`.
   */
  readonly reason: string;
  /** start: time to make the sandbox ready; recycle: its lifetime. */
  readonly durationMs: number;
}

/**
 * Trouble with a sandbox that operators count, by class: a message refused to
 * a stdio server because too much of its stdin waits unread (`stdin_refused`),
 * a stdio server stopped as stuck (`stdin_stalled`), a sandbox that died on
 * its own (`died`: its server exited or was killed, or was stopped as stuck),
 * an http upstream's answer cut for being past 10 MiB (`answer_too_large`:
 * a JSON body or one SSE event).
 */
export type SandboxTrouble = 'stdin_refused' | 'stdin_stalled' | 'died' | 'answer_too_large';

/** Receives metering events. `record` must not throw or block. */
export interface MeteringSink {
  record(event: MeteringEvent): void;
  close?(): Promise<void>;
}

interface EngineCommon {
  /** Seconds a sandbox lives on after its last session leaves. Default 300. */
  readonly expireSeconds?: number;
  /** Pre-started sandboxes kept ready for this class. Default 0 (no pool). */
  readonly warmPool?: number;
  /** Seconds a stdio or http server may take to answer `initialize` before its start fails. Default 30. */
  readonly startTimeoutSeconds?: number;
}

/** How sandboxes of one class are made. */
export type EngineConfig = EngineCommon &
  (
    | { readonly engine: 'builtin' }
    | {
        readonly engine: 'stdio';
        readonly command: string;
        readonly args?: readonly string[];
        readonly env?: Readonly<Record<string, string>>;
        /** Directory the server runs in, where a relative command is taken from. Default: the runtime's. */
        readonly cwd?: string;
      }
    | { readonly engine: 'http'; readonly url: string; readonly headers?: Readonly<Record<string, string>> }
    /** An engine supplied in `SandboxHostOptions.engines` under `name` (fixtures, embedders). */
    | { readonly engine: 'custom'; readonly name: string }
  );

export interface SandboxHostOptions {
  readonly runtimeId: string;
  /** Sandbox classes this runtime serves; `default` is used when a request names none. */
  readonly classes: Readonly<Record<string, EngineConfig>>;
  /** Engines referenced by `{engine: 'custom', name}` classes. */
  readonly engines?: Readonly<Record<string, Engine>>;
  /**
   * Most sandboxes alive at once, counting those starting and those still
   * being destroyed (a stdio server in its exit grace); warm-pool sandboxes
   * not counted.
   */
  readonly sandboxesMax: number;
  /** A legacy session with no request for this long is closed. */
  readonly sessionIdleMs: number;
  /** Most legacy sessions open at once. Default 10 000. */
  readonly sessionsMax?: number;
  readonly reporter: StateReporter;
  readonly logger: Logger;
  /** Lifecycle event sink. Default: `logMeteringSink(logger)`. */
  readonly meter?: MeteringSink;
  /**
   * Told of each {@link SandboxTrouble} with the sandbox's class, as it
   * happens (for metrics; the log has them too, throttled). Must not throw
   * or block. Default: nothing.
   */
  readonly onTrouble?: (trouble: SandboxTrouble, className: string) => void;
  /** Told of each tool call a client cancelled, with its class (`stats()` counts them too). Must not throw. */
  readonly onCancelled?: (className: string) => void;
  /**
   * Told once of each `tools/call` a sandbox served, over MCP (either
   * protocol generation) or REST, whatever its engine: its class, its
   * outcome (`ok`, `error`, `cancelled`) and its seconds on `clock`; a
   * call of several rounds once, as its last settles, timed from its first.
   * Default: nothing (and nothing is timed).
   */
  readonly onToolCall?: ToolCallSink;
  /**
   * Wait after a warm-pool hand-out before starting its replacement, so the
   * start does not compete with the new session's first calls. Default 250;
   * 0 refills at once.
   */
  readonly warmPoolRefillDelayMs?: number;
  /** Default `systemClock`. */
  readonly clock?: Clock;
}

/** Counters for tests and probes. */
export interface HostStats {
  /** Sandboxes alive, warm pool excluded. */
  readonly sandboxes: number;
  /** The same sandboxes by class: every configured class, from 0; a running count, so cheap to read. */
  readonly sandboxesByClass: Readonly<Record<string, number>>;
  readonly sessions: number;
  /** Tool calls cancelled by the client while running (builtin, and calls proxied upstream). */
  readonly cancelled: number;
  /** Warm-pool sandboxes started and waiting, over all classes. */
  readonly warm: number;
  /** Event streams being answered on `/mcp`: sessions' GET streams, calls' SSE answers, listen streams. */
  readonly eventStreams: number;
}

/** Structural request/response shapes: node `http` and `http2` compat objects both fit. */
export interface HostRequest extends AsyncIterable<unknown> {
  method?: string;
  url?: string;
  headers: Record<string, string | string[] | undefined>;
}
export interface HostResponse {
  writeHead(statusCode: number, headers?: Record<string, string>): unknown;
  write(chunk: string | Uint8Array): unknown;
  end(chunk?: string | Uint8Array): unknown;
  on(event: string, listener: (...args: unknown[]) => void): unknown;
  destroyed?: boolean;
}
