import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import { sleep, systemClock } from '@switchyard/clock';
import type { Clock } from '@switchyard/clock';
import { closeServer } from './http.ts';
import { abandonOutput } from './logger.ts';

export type Handler = (req: IncomingMessage, res: ServerResponse) => void;
export type ShutdownHook = () => void | Promise<void>;
export type DrainHook = () => void | Promise<void>;

/** The slice of a logger the lifecycle uses (a pino Logger fits). */
export interface LifecycleLogger {
  info(obj: object, msg?: string): void;
  warn(obj: object, msg?: string): void;
  error(obj: object, msg?: string): void;
}

/** What a process must offer to have signal handlers installed (`process` fits). */
export interface SignalSource {
  on(signal: 'SIGTERM' | 'SIGINT' | 'disconnect', listener: () => void): unknown;
  off(signal: 'SIGTERM' | 'SIGINT' | 'disconnect', listener: () => void): unknown;
  /** Set when a parent spawned this process with an IPC channel; `disconnect` is its end. */
  readonly channel?: unknown;
}

export interface LifecycleOptions {
  /** Time between turning unready and closing listeners, so load balancers stop routing here. Default 5000. */
  readonly drainDelayMs?: number;
  /** Bound on finishing in-flight work after listeners close; then connections are cut. Default 30000. */
  readonly shutdownTimeoutMs?: number;
  readonly logger: LifecycleLogger;
  /** Default: the system clock. */
  readonly clock?: Clock;
  /** Called with the exit code after a signal-driven shutdown. Default: `process.exit`. */
  readonly exit?: (code: number) => void;
  /** Default: `process`. */
  readonly signals?: SignalSource;
}

export interface ShutdownResult {
  /** Connections were still open at the deadline and were cut. */
  readonly forced: boolean;
  /** Every hook finished without throwing before the deadline. */
  readonly hooksOk: boolean;
}

export type LifecycleState = 'starting' | 'ready' | 'draining' | 'stopped';

export interface Lifecycle {
  readonly state: LifecycleState;
  readonly ready: boolean;
  readonly draining: boolean;
  /** Call once every listener is bound. Ignored once draining. */
  markReady(): void;
  /** Always 200 while the process serves HTTP at all. */
  readonly healthzHandler: Handler;
  /** 200 after markReady while every readiness check passes; 503 before it, on a failing check and from the start of a drain. */
  readonly readyzHandler: Handler;
  /**
   * One more condition of readiness besides the lifecycle's own state (a
   * runtime's tunnel being up): `check` returns why the process is not
   * ready, which /readyz reports as its status, or undefined.
   */
  addReadinessCheck(check: () => string | undefined): void;
  /** A server to stop (stop accepting, finish in-flight, cut at the deadline) during shutdown. */
  addServer(server: Server): void;
  /**
   * Runs at the start of a drain, before the drain delay (a runtime stops
   * taking new sandboxes). A hook may return a promise of the moment its app
   * has nothing left to drain (a runtime holding no sandbox): once every such
   * promise has resolved, the drain ends before its delay. Hooks that return
   * nothing never end it early. One that throws or rejects is logged.
   */
  onDrain(hook: DrainHook): void;
  /**
   * Runs once the drain delay is over, right after the servers stopped
   * accepting, before their requests in flight are waited for: for an app to
   * end what never ends by itself and would otherwise be cut only at the
   * deadline (a gateway's event streams, whose clients open them again on
   * another replica). Synchronous; one that throws is logged.
   */
  onServersClosing(hook: () => void): void;
  /** Runs after the servers closed, in reverse registration order, within the remaining deadline. */
  onShutdown(hook: ShutdownHook): void;
  /** Starts (or joins) the shutdown sequence. Idempotent. */
  shutdown(reason?: string): Promise<ShutdownResult>;
  /**
   * SIGTERM/SIGINT → shutdown → exit(0) (1 when a hook failed); a second signal exits 1 at once. In a
   * process spawned with an IPC channel (`switchyard up --processes` starts its components so), the
   * channel's end starts the same shutdown: the parent is gone, however it ended (SIGKILL too), and
   * the process must not outlive it. That end is no signal: one after it is still the first. Returns
   * an uninstaller.
   */
  installSignalHandlers(): () => void;
}

function reply(res: ServerResponse, status: number, body: object): void {
  res.writeHead(status, { 'content-type': 'application/json', 'cache-control': 'no-store' });
  res.end(JSON.stringify(body));
}

/**
 * Probes and graceful shutdown for one app process. The sequence on
 * shutdown: unready (readyz 503) and drain hooks → wait drainDelayMs (less
 * once the drain hooks say nothing is left) → close every added server
 * (stop accepting), run the servers-closing hooks, let in-flight requests
 * finish → hooks in reverse order → done. The whole post-drain part is
 * bounded by shutdownTimeoutMs: connections still open at the deadline are
 * cut and hooks still running are abandoned (reported, not awaited).
 */
export function createLifecycle(options: LifecycleOptions): Lifecycle {
  const drainDelayMs = options.drainDelayMs ?? 5000;
  const shutdownTimeoutMs = options.shutdownTimeoutMs ?? 30000;
  const clock = options.clock ?? systemClock;
  const { logger } = options;
  const servers = new Set<Server>();
  const hooks: ShutdownHook[] = [];
  const drainHooks: DrainHook[] = [];
  const closingHooks: Array<() => void> = [];
  const readinessChecks: Array<() => string | undefined> = [];
  let state: LifecycleState = 'starting';
  let shuttingDown: Promise<ShutdownResult> | undefined;

  async function runHooks(deadlineAt: number): Promise<boolean> {
    let ok = true;
    for (const hook of [...hooks].reverse()) {
      const remainingMs = Math.max(0, deadlineAt - clock.monotonicNow());
      let timer: { cancel(): void } | undefined;
      const timedOut = new Promise<'timeout'>(
        (resolve) => (timer = clock.setTimeout(() => resolve('timeout'), remainingMs)),
      );
      try {
        const outcome = await Promise.race([Promise.resolve().then(hook), timedOut]);
        if (outcome === 'timeout') {
          logger.error({ remainingMs }, 'shutdown hook did not finish before the deadline');
          return false;
        }
      } catch (error) {
        ok = false;
        logger.error({ err: error }, 'shutdown hook failed');
      } finally {
        timer?.cancel();
      }
    }
    return ok;
  }

  /** Runs the drain hooks, then waits out the drain delay, or less once every hook's promise resolved. */
  async function drain(): Promise<void> {
    const drained: Promise<void>[] = [];
    const failed = (error: unknown): void => logger.error({ err: error }, 'drain hook failed');
    for (const hook of drainHooks) {
      try {
        const done = hook();
        // A hook that failed has not drained: its promise never resolves, so the delay runs out.
        if (done) drained.push(done.catch((error: unknown) => (failed(error), new Promise<void>(() => {}))));
      } catch (error) {
        failed(error);
      }
    }
    if (drained.length === 0) return sleep(clock, drainDelayMs);
    let timer: { cancel(): void } | undefined;
    const delay = new Promise<false>((resolve) => (timer = clock.setTimeout(() => resolve(false), drainDelayMs)));
    if (await Promise.race([delay, Promise.all(drained).then(() => true)])) {
      timer?.cancel();
      logger.info({}, 'nothing left to drain');
    }
  }

  async function sequence(reason: string): Promise<ShutdownResult> {
    state = 'draining';
    logger.info({ reason, drainDelayMs }, 'draining');
    await drain();
    const deadlineAt = clock.monotonicNow() + shutdownTimeoutMs;
    const closing = [...servers].map((s) => closeServer(s, { timeoutMs: shutdownTimeoutMs, clock }));
    for (const hook of closingHooks) {
      try {
        hook();
      } catch (error) {
        logger.error({ err: error }, 'servers-closing hook failed');
      }
    }
    const closed = await Promise.all(closing);
    const forced = closed.some((c) => c.forced);
    if (forced) logger.warn({ shutdownTimeoutMs }, 'connections cut at the shutdown deadline');
    const hooksOk = await runHooks(deadlineAt);
    state = 'stopped';
    logger.info({ forced, hooksOk }, 'stopped');
    return { forced, hooksOk };
  }

  const lifecycle: Lifecycle = {
    get state() {
      return state;
    },
    get ready() {
      return state === 'ready';
    },
    get draining() {
      return state === 'draining';
    },
    markReady() {
      if (state === 'starting') state = 'ready';
    },
    healthzHandler: (_req, res) => reply(res, 200, { status: 'ok' }),
    readyzHandler: (_req, res) => {
      if (state !== 'ready') return reply(res, 503, { status: state });
      for (const check of readinessChecks) {
        const notReady = check();
        if (notReady !== undefined) return reply(res, 503, { status: notReady });
      }
      reply(res, 200, { status: state });
    },
    addReadinessCheck(check) {
      readinessChecks.push(check);
    },
    addServer(server) {
      servers.add(server);
    },
    onDrain(hook) {
      drainHooks.push(hook);
    },
    onServersClosing(hook) {
      closingHooks.push(hook);
    },
    onShutdown(hook) {
      hooks.push(hook);
    },
    shutdown(reason = 'requested') {
      shuttingDown ??= sequence(reason);
      return shuttingDown;
    },
    installSignalHandlers() {
      const signals = options.signals ?? process;
      const exit = options.exit ?? ((code: number) => process.exit(code));
      let received = 0;
      let stopping = false;
      let parentGone = false;
      const done = (code: number): void => {
        // The parent read this process's output: what is left of it cannot be written anywhere now.
        if (parentGone) abandonOutput(logger);
        exit(code);
      };
      const stop = (reason: string): void => {
        if (stopping) return;
        stopping = true;
        lifecycle.shutdown(reason).then(
          (result) => done(result.hooksOk ? 0 : 1),
          (error: unknown) => {
            logger.error({ err: error }, 'shutdown failed');
            done(1);
          },
        );
      };
      const onSignal = (signal: string) => (): void => {
        received++;
        if (received > 1) {
          logger.warn({ signal }, 'second signal: exiting without waiting');
          done(1);
          return;
        }
        stop(signal);
      };
      const onTerm = onSignal('SIGTERM');
      const onInt = onSignal('SIGINT');
      const onDisconnect = (): void => {
        parentGone = true;
        logger.info({}, 'parent process gone (IPC channel closed)');
        stop('parent exited');
      };
      signals.on('SIGTERM', onTerm);
      signals.on('SIGINT', onInt);
      if (signals.channel) signals.on('disconnect', onDisconnect);
      return () => {
        signals.off('SIGTERM', onTerm);
        signals.off('SIGINT', onInt);
        signals.off('disconnect', onDisconnect);
      };
    },
  };
  return lifecycle;
}
