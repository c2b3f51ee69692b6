// Steady load for chaos scenarios: a bounded pool of SDK v2 legacy sessions,
// each calling `counter` in a loop through its gateway, with per-session
// accounting of every call. A sandbox's counter must go 1, 2, 3, … — a value
// that repeats means a call executed twice; one that skips more than the
// number of failed calls since the last success means a call ran without
// its client asking. Any error ends the session the way a real client ends
// it: it asks again (new calls, never a replay) until it sees the 404 that
// says the session is lost or gets through, then re-initializes with a fresh
// process id, so every sandbox is counted from 1.
import { connectLegacy, textOf, type McpClient } from './clients.ts';

export interface CallError {
  readonly atMs: number;
  readonly session: number;
  readonly runtime: string;
  readonly gateway: number;
  readonly status: number | undefined;
  readonly message: string;
}

export interface SessionState {
  readonly index: number;
  /** Gateway index the session talks through now. */
  gateway: number;
  /** Runtime hosting its sandbox (from `whoami`), or '' while (re)initializing. */
  runtime: string;
  processId: string;
  generation: number;
  last: number;
  /** Failed calls since the last success on this sandbox (each may have executed). */
  uncertain: number;
  calls: number;
  /** performance.now() of the last successful call. */
  lastOkMs: number;
  reinits: number;
}

export interface LoadOptions {
  /** `/mcp` URL of gateway `i`, read at each (re)connect so restarted gateways are found. */
  readonly gatewayUrl: (i: number) => string;
  readonly gateways: number;
  readonly sessions: number;
  /** Hard bounds of every loop. */
  readonly deadlineMs: number;
  readonly callsMax: number;
  /** Pause between calls, so the load leaves CPU to the cluster on a small machine. */
  readonly pauseMs: number;
  readonly callTimeoutMs: number;
}

const ERRORS_MAX = 5000;
const VIOLATIONS_MAX = 200;
const RECOVERIES_MAX = 5000;

/** HTTP status of an SDK error: its `status` (SdkHttpError data) or "(HTTP 404)" in its message, if any. */
export function statusOf(error: unknown): number | undefined {
  const e = error as { status?: unknown; data?: { status?: unknown }; message?: string };
  const status = e.data?.status ?? e.status;
  if (typeof status === 'number') return status;
  const match = /\(HTTP (\d{3})\)/.exec(e.message ?? '');
  return match ? Number(match[1]) : undefined;
}

const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

export class SessionLoad {
  readonly sessions: SessionState[];
  readonly errors: CallError[] = [];
  /** Counter skips and repeats: each is a broken exactly-once guarantee. */
  readonly violations: string[] = [];
  /** Re-initializations: when, which session, on which runtime it landed, how long it took since its first error. */
  readonly recoveries: Array<{
    atMs: number;
    session: number;
    from: string;
    to: string;
    downMs: number;
    saw404: boolean;
  }> = [];
  readonly #options: LoadOptions;
  #stopped = false;
  #loops: Promise<void>[] = [];

  constructor(options: LoadOptions) {
    this.#options = options;
    this.sessions = Array.from({ length: options.sessions }, (_, index) => ({
      index,
      gateway: index % options.gateways,
      runtime: '',
      processId: '',
      generation: 0,
      last: 0,
      uncertain: 0,
      calls: 0,
      lastOkMs: 0,
      reinits: 0,
    }));
  }

  start(): void {
    this.#loops = this.sessions.map((s) => this.#run(s));
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    await Promise.all(this.#loops);
  }

  #live(): boolean {
    return !this.#stopped && performance.now() < this.#options.deadlineMs;
  }

  async #open(s: SessionState): Promise<McpClient> {
    for (let attempt = 0; this.#live(); attempt++) {
      // Alternate gateways after a failed attempt: a client that loses its gateway tries another.
      const gateway = attempt === 0 ? s.gateway : (s.gateway + attempt) % this.#options.gateways;
      s.generation++;
      const processId = `chaos-${s.index}-${s.generation}`;
      try {
        const client = await connectLegacy(this.#options.gatewayUrl(gateway), { 'x-switchyard-process': processId });
        const who = JSON.parse(
          textOf(await client.callTool({ name: 'whoami', arguments: {} }, { timeout: this.#options.callTimeoutMs })),
        ) as { runtime: string };
        Object.assign(s, { gateway, processId, runtime: who.runtime, last: 0, uncertain: 0 });
        return client;
      } catch {
        await pause(200);
      }
    }
    throw new Error('load stopped');
  }

  async #run(s: SessionState): Promise<void> {
    let client: McpClient | undefined;
    let firstErrorMs: number | undefined;
    let saw404 = false;
    let from = '';
    try {
      for (let n = 0; n < this.#options.callsMax && this.#live(); n++) {
        if (!client) {
          client = await this.#open(s).catch(() => undefined);
          if (!client) return;
          if (firstErrorMs !== undefined) {
            s.reinits++;
            const downMs = performance.now() - firstErrorMs;
            if (this.recoveries.length < RECOVERIES_MAX) {
              this.recoveries.push({ atMs: performance.now(), session: s.index, from, to: s.runtime, downMs, saw404 });
            }
          }
          firstErrorMs = undefined;
          saw404 = false;
        }
        try {
          const result = await client.callTool(
            { name: 'counter', arguments: {} },
            { timeout: this.#options.callTimeoutMs },
          );
          this.#account(s, Number(textOf(result)));
          if (firstErrorMs !== undefined) firstErrorMs = undefined;
        } catch (error) {
          const message = (error as Error).message;
          const status = statusOf(error);
          if (this.errors.length < ERRORS_MAX) {
            this.errors.push({
              atMs: performance.now(),
              session: s.index,
              runtime: s.runtime,
              gateway: s.gateway,
              status,
              message,
            });
          }
          s.uncertain++;
          firstErrorMs ??= performance.now();
          // Ask again on the same session a few times: a transient failure may pass, a lost session answers 404.
          if (status === 404 || s.uncertain > 3) {
            saw404 = status === 404;
            from = s.runtime;
            void client.close().catch(() => undefined);
            client = undefined;
            s.runtime = '';
          } else {
            await pause(300);
          }
        }
        await pause(this.#options.pauseMs);
      }
    } finally {
      await client?.close().catch(() => undefined);
    }
  }

  #account(s: SessionState, value: number): void {
    const expectedMin = s.last + 1;
    const expectedMax = s.last + 1 + s.uncertain;
    if (!Number.isInteger(value) || value < expectedMin || value > expectedMax) {
      if (this.violations.length < VIOLATIONS_MAX) {
        const kind = value <= s.last ? 'repeated' : 'skipped';
        this.violations.push(
          `session ${s.index} (${s.processId} on ${s.runtime}): counter ${kind}: ${value} after ${s.last} with ${s.uncertain} uncertain call(s)`,
        );
      }
    }
    s.last = value;
    s.uncertain = 0;
    s.calls++;
    s.lastOkMs = performance.now();
  }

  /** Errors seen in [fromMs, toMs]. */
  errorsBetween(fromMs: number, toMs: number): CallError[] {
    return this.errors.filter((e) => e.atMs >= fromMs && e.atMs <= toMs);
  }

  /** True when every session has made a successful call after `sinceMs`. */
  allHealthySince(sinceMs: number): boolean {
    return this.sessions.every((s) => s.lastOkMs > sinceMs && s.runtime !== '');
  }
}
