import { resolve } from 'node:path';
import { getDefaultEnvironment } from '@modelcontextprotocol/client/stdio';
import { toNodeHandler } from '@modelcontextprotocol/node';
import { systemClock, type Clock } from '@switchyard/clock';
import { DEFAULT_CLASS, ERROR_CODES, MCP_SESSION_HEADER, SwitchyardError, jsonRpcError } from '@switchyard/protocol';
import { builtinEngine } from './builtin.ts';
import type { Engine, EngineContext } from './engine.ts';
import { answerWriter } from './answer.ts';
import { InFlight } from './in-flight.ts';
import { McpEndpoint } from './endpoint.ts';
import { httpEngine } from './http-engine.ts';
import { withWarmPool, type WarmPoolEngine } from './warm-pool.ts';
import { logMeteringSink, withMetering } from './metering.ts';
import { SandboxRegistry, type ClassRuntime } from './registry.ts';
import { restFetch } from './rest.ts';
import { RoundStarts } from './round-starts.ts';
import { SessionTable } from './sessions.ts';
import { stdioEngine } from './stdio-engine.ts';
import { commandProblem } from './command-check.ts';
import type { EngineConfig, HostRequest, HostResponse, HostStats, SandboxHostOptions } from './types.ts';

/** Defaults of {@link SandboxHostOptions} and {@link EngineConfig}. */
export const SANDBOX_DEFAULTS = {
  /** Seconds a sandbox outlives its last session. */
  expireSeconds: 300,
  /**
   * Seconds a server may take to answer `initialize`: under the 60 s MCP
   * clients wait for an answer, so a client whose sandbox cannot start is
   * told so, not left to time out.
   */
  startTimeoutSeconds: 30,
  /** Legacy sessions open at once. */
  sessionsMax: 10_000,
  /** Largest `/mcp` or REST body, bytes. */
  bodyBytesMax: 4 * 1024 * 1024,
  /** Wait after a warm-pool hand-out before starting its replacement, ms (keeps the start off the new session's first calls). */
  warmPoolRefillDelayMs: 250,
  /** How long an answer may wait for its client to take any of it before it is ended, ms (see answer.ts). */
  writeStallMs: 60_000,
} as const;

/** A runtime's sandboxes and the MCP and REST endpoints in front of them. */
export interface SandboxHost {
  /** Serves `/mcp` (POST/GET/DELETE) on node `http` or `http2` compat request/response objects. */
  handleMcp(req: HostRequest, res: HostResponse): Promise<void>;
  /** Serves the REST parity routes (`/weight`, `/sandboxes/:id…`, `/sessions/:id/toolcall`). */
  handleRest(req: HostRequest, res: HostResponse): Promise<void>;
  /** Current counts; cheap. */
  stats(): HostStats;
  /**
   * Refuses new requests (503), lets those being answered finish for up to
   * `graceMs` (streams that last as long as their clients aside: GET, listen), then
   * closes sessions, destroys sandboxes and warm pools, kills children, which
   * cancels what is still in flight. Idempotent: a later call joins the first.
   */
  close(graceMs?: number): Promise<void>;
}

function startTimeoutSeconds(config: EngineConfig): number {
  return config.startTimeoutSeconds ?? SANDBOX_DEFAULTS.startTimeoutSeconds;
}

function baseEngine(
  config: EngineConfig,
  clock: Clock,
  engines: SandboxHostOptions['engines'],
  onTrouble: NonNullable<SandboxHostOptions['onTrouble']>,
): Engine {
  switch (config.engine) {
    case 'custom': {
      const engine = engines?.[config.name];
      if (!engine) throw new SwitchyardError('invalid_request', `no custom engine named "${config.name}"`);
      return engine;
    }
    case 'builtin':
      return builtinEngine(clock);
    case 'stdio':
      return stdioEngine(config, startTimeoutSeconds(config), clock, onTrouble);
    case 'http':
      return httpEngine(config, startTimeoutSeconds(config), clock, onTrouble);
  }
}

/**
 * A command this node lacks fails every start of its class, each told to
 * one client at a time: said once here, before any client is refused. Not
 * refused: the runtime's other classes serve on, and the gateway tries the
 * class's other runtimes.
 */
function warnIfCommandMissing(
  className: string,
  config: Extract<EngineConfig, { engine: 'stdio' }>,
  logger: SandboxHostOptions['logger'],
): void {
  // The PATH the server gets, where spawn looks (see stdioEngine).
  const path = config.env?.PATH ?? getDefaultEnvironment().PATH;
  // spawn runs the server in the class's cwd, where a relative command (and a relative PATH entry) is looked up.
  const problem = commandProblem(config.command, path, resolve(config.cwd ?? '.'));
  if (problem === undefined) return;
  logger.warn(
    { event: 'sandbox.command_not_found', class: className, command: config.command },
    `stdio class ${className}: ${problem}; each of its sandboxes will fail to start`,
  );
}

/**
 * Creates a sandbox host. Guarantees: each legacy session and each stateless
 * request runs against exactly one sandbox; the reporter sees every process
 * and thread added before it is removed; the idle weight `{sandboxes:
 * sandboxesMax − active}` is reported on every change. Throws
 * `invalid_request` for a custom class whose engine is not supplied. Not guaranteed:
 * sandboxes survive a host restart (they are in-process or children).
 */
export function createSandboxHost(options: SandboxHostOptions): SandboxHost {
  const clock = options.clock ?? systemClock;
  const { logger, reporter } = options;
  const meter = options.meter ?? logMeteringSink(logger);
  const onTrouble = options.onTrouble ?? (() => {});
  let cancelled = 0;
  const onCancelled = (className: string): void => {
    cancelled++;
    options.onCancelled?.(className);
  };
  const pools: WarmPoolEngine[] = [];
  const classes = new Map<string, ClassRuntime>();
  for (const [className, config] of Object.entries(options.classes)) {
    const ctx: EngineContext = {
      runtimeId: options.runtimeId,
      className,
      logger,
      onCancelled: () => onCancelled(className),
    };
    if (config.engine === 'stdio') warnIfCommandMissing(className, config, logger);
    let engine = baseEngine(config, clock, options.engines, onTrouble);
    if ((config.warmPool ?? 0) > 0) {
      const refillDelayMs = options.warmPoolRefillDelayMs ?? SANDBOX_DEFAULTS.warmPoolRefillDelayMs;
      const pool = withWarmPool(engine, { size: config.warmPool!, refillDelayMs, clock }, ctx);
      pools.push(pool);
      engine = pool;
    }
    engine = withMetering(engine, meter, clock);
    classes.set(className, { engine, expireMs: (config.expireSeconds ?? SANDBOX_DEFAULTS.expireSeconds) * 1000 });
  }
  const defaultClass = classes.has(DEFAULT_CLASS) ? DEFAULT_CLASS : undefined;

  const sessions: SessionTable = new SessionTable({
    sessionsMax: options.sessionsMax ?? SANDBOX_DEFAULTS.sessionsMax,
    idleMs: options.sessionIdleMs,
    clock,
    onClosed(session, reason) {
      logger.debug({ event: 'session.closed', session: session.id, reason }, 'session closed');
      session.detach();
      void session.transport.close().catch(() => undefined);
      void session.server.close().catch(() => undefined);
      reporter.removeThread(session.sandbox.id, session.id);
      registry.release(session.sandbox);
    },
  });
  const registry: SandboxRegistry = new SandboxRegistry({
    runtimeId: options.runtimeId,
    classes,
    sandboxesMax: options.sandboxesMax,
    reporter,
    logger,
    clock,
    onCancelled,
    onRemoved: (sandbox) => sessions.closeForSandbox(sandbox.id, 'sandbox_removed'),
    onTrouble,
  });
  const inFlight = new InFlight();
  const toolCalls = options.onToolCall ? { clock, sink: options.onToolCall, rounds: new RoundStarts() } : undefined;
  const endpoint = new McpEndpoint({ registry, sessions, reporter, logger, defaultClass, inFlight, toolCalls });
  const nodeOpts = {
    maxRequestBodySize: SANDBOX_DEFAULTS.bodyBytesMax,
    writeStallMs: SANDBOX_DEFAULTS.writeStallMs,
    onerror: (error: Error) =>
      clientLeft(error)
        ? logger.debug({ event: 'http.client_left', err: error.message }, 'client left before its request was read')
        : logger.error({ event: 'http.failed', err: error.message }, 'handler failed'),
  };
  const eventStreams = { open: 0 };
  const mcp = answerWriter(endpoint.handle, { ...nodeOpts, eventStreams });
  const rest = toNodeHandler({ fetch: restFetch({ registry, sessions, defaultClass, toolCalls }) }, nodeOpts);
  let closing: Promise<void> | undefined;
  return {
    async handleMcp(req, res) {
      if (closing) return rejectClosed(req, res);
      await mcp(req, withoutHopByHop(res));
    },
    async handleRest(req, res) {
      if (closing) return rejectClosed(req, res);
      await inFlight.settle(rest(req, withoutHopByHop(res)));
    },
    stats: () => ({
      sandboxes: registry.size,
      sandboxesByClass: registry.sizeByClass(),
      sessions: sessions.size,
      cancelled,
      warm: pools.reduce((n, p) => n + p.available, 0),
      eventStreams: eventStreams.open,
    }),
    close(graceMs = 0) {
      closing ??= (async () => {
        if (inFlight.count > 0 && graceMs > 0) {
          logger.info({ requests: inFlight.count, graceMs }, 'letting the requests in flight finish');
          await inFlight.idle(clock, graceMs);
        }
        // Closing their sessions and sandboxes cancels what is left.
        if (inFlight.count > 0) logger.warn({ requests: inFlight.count }, 'requests still in flight cut at close');
        sessions.closeAll('closed');
        await endpoint.close();
        await registry.close();
        await Promise.all(pools.map((p) => p.close()));
        await meter.close?.();
      })();
      return closing;
    },
  };
}

/** Connection-specific headers (RFC 9113 §8.2.2); the SDK adapter may set them (`Connection: keep-alive` on SSE). */
const HOP_BY_HOP = ['connection', 'keep-alive', 'proxy-connection', 'transfer-encoding', 'upgrade'];

/**
 * Drops the hop-by-hop headers the SDK sets, leaving the connection to Node.
 * HTTP/2 forbids them (Node would warn and drop them). On HTTP/1.1 a
 * `Connection` header set by the app stops Node from announcing its
 * `Keep-Alive: timeout`; a pooling client (the gateway's, in direct mode)
 * then keeps an idle connection past the server's timeout, and a request
 * sent on it as the server closes it is reset.
 */
function withoutHopByHop(res: HostResponse): HostResponse {
  const writeHead = res.writeHead.bind(res);
  res.writeHead = (status, headers) => {
    const kept = { ...headers };
    for (const name of Object.keys(kept)) if (HOP_BY_HOP.includes(name.toLowerCase())) delete kept[name];
    return writeHead(status, kept);
  };
  return res;
}

/**
 * A closing host's answer: 503, or 404 to a request of a legacy session,
 * which is lost with the host, so that its client re-initializes (and lands
 * elsewhere) rather than retry here.
 */
function rejectClosed(req: HostRequest, res: HostResponse): void {
  const [code, message] =
    req.headers[MCP_SESSION_HEADER] === undefined
      ? (['not_ready', 'runtime is shutting down'] as const)
      : (['session_not_found', 'Session not found: its runtime is shutting down; re-initialize'] as const);
  res.writeHead(ERROR_CODES[code].status, { 'content-type': 'application/json' });
  res.end(JSON.stringify(jsonRpcError(code, message)));
}

/**
 * The error of reading a request whose client closed its connection before
 * the body's end (Node's `aborted`, or the read cancelled as the response
 * closed): the client's doing, and common under load, so no error line.
 */
function clientLeft(error: Error): boolean {
  return (
    error.message === 'aborted' || error.name === 'AbortError' || (error as { code?: unknown }).code === 'ECONNRESET'
  );
}
