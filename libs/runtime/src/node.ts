import http from 'node:http';
import { sleep, systemClock, type Clock } from '@switchyard/clock';
import { RuntimeStateStore, createSidecarHandler, createWatchHandler } from '@switchyard/agent';
import {
  FORWARDED_HEADER_BYTES_MAX,
  RUNTIME_DIRECT_REALM,
  RUNTIME_VERSION_MESSAGE,
  SwitchyardError,
  isRuntimeVersion,
  type RuntimeInfo,
} from '@switchyard/protocol';
import { createSandboxHost } from '@switchyard/sandbox';
import {
  CONNECTIONS_MAX_DEFAULT,
  SERVER_KEEP_ALIVE_MS,
  WRITE_STALL_TIMEOUT_MS_DEFAULT,
  capConnections,
  closeServer,
  closeStalledWrites,
  deadlineOptions,
  listen,
  metricsHandler,
  tcpKeepAliveOptions,
  urlHost,
  watchTokenRevocations,
  type TokenRevocations,
} from '@switchyard/service';
import { bearerMatches, dialTunnel } from '@switchyard/tunnel';
import { cancelledCounter, registerNodeMetrics, toolCallMetrics, troubleCounters } from './metrics.ts';
import type { RuntimeLogger, RuntimeNodeOptions } from './options.ts';
import { runtimeRouter } from './router.ts';

export interface RuntimeNode {
  readonly runtimeId: string;
  /** True while the tunnel to the scheduler is open. */
  readonly connected: boolean;
  /** True while another runtime that connected with this id holds its place (the node dials again after 5 min). */
  readonly replaced: boolean;
  /** `http://127.0.0.1:<port>` of the sidecar API, when enabled. */
  readonly sidecarUrl: string | undefined;
  /** Base URL of the direct listener, when enabled. */
  readonly directUrl: string | undefined;
  stats(): { sandboxes: number; sessions: number; cancelled: number; eventStreams: number };
  /** Resolves once the tunnel is (re)connected. */
  whenConnected(): Promise<void>;
  /**
   * Takes no new sandboxes from now on: the node reports no idle weight, so
   * schedulers place no new process here, while sessions of the processes it
   * holds go on being served until `close()`. Resolves once the node holds
   * no sandbox (its last sessions ended and their sandboxes expired), or at
   * `close()`.
   */
  drain(): Promise<void>;
  /**
   * Sends GOAWAY on the tunnel, lets requests in flight finish (for up to
   * 20 s), then closes sessions, sandboxes, the tunnel and the listeners.
   * Idempotent.
   */
  close(): Promise<void>;
}

/**
 * How long requests in flight (tool calls) get to finish when the node
 * closes; within the 30 s an app's shutdown hooks get, after its listeners.
 */
const CLOSE_GRACE_MS = 20_000;

/** How often a draining node looks whether it still holds a sandbox. */
const DRAIN_CHECK_MS = 250;

/** Period of the handle that keeps the process alive; its callback does nothing. */
const KEEP_ALIVE_INTERVAL_MS = 3_600_000;

/**
 * Starts a runtime node: a sandbox host behind MCP, its state store and
 * `/watch` stream, and the tunnel dialler that keeps it joined to the
 * scheduler. Optional listeners: the sidecar API (127.0.0.1) and a direct
 * MCP listener guarded by a bearer token. The node keeps the Node.js process
 * alive until `close()`, even while no tunnel is up. A `version` that is
 * no semantic version is refused here, before anything starts: every
 * scheduler would refuse the join with a 400 that only the logs show.
 */
export async function startRuntimeNode(options: RuntimeNodeOptions): Promise<RuntimeNode> {
  if (options.version !== undefined && !isRuntimeVersion(options.version)) {
    throw new SwitchyardError(
      'invalid_request',
      `version ${JSON.stringify(options.version)} ${RUNTIME_VERSION_MESSAGE}`,
    );
  }
  const clock = options.clock ?? systemClock;
  const { logger, runtimeId } = options;
  const store = new RuntimeStateStore({ clock });
  store.setIdleWeight({ sandboxes: options.sandboxesMax });
  if (options.metadata) store.setMetadata({ ...options.metadata });
  const host = createSandboxHost({
    runtimeId,
    classes: options.classes,
    ...(options.engines ? { engines: options.engines } : {}),
    sandboxesMax: options.sandboxesMax,
    sessionIdleMs: options.sessionIdleMs,
    ...(options.warmPoolRefillDelayMs === undefined ? {} : { warmPoolRefillDelayMs: options.warmPoolRefillDelayMs }),
    reporter: store,
    logger,
    clock,
    ...(options.meter ? { meter: options.meter } : {}),
    onTrouble: troubleCounters(options.metrics, options.classes),
    onCancelled: cancelledCounter(options.metrics, options.classes),
    onToolCall: toolCallMetrics(options.metrics, options.classes),
  });
  const watch = createWatchHandler(store, { clock });
  const route = runtimeRouter(host, watch, metricsHandler(options.metrics.registry));

  const servers: http.Server[] = [];
  let sidecarUrl: string | undefined;
  if (options.sidecarPort !== undefined) {
    const sidecar = http.createServer(createSidecarHandler(store));
    const bound = await listen(sidecar, { host: '127.0.0.1', port: options.sidecarPort });
    sidecarUrl = `http://127.0.0.1:${bound.port}`;
    servers.push(sidecar);
  }
  let directUrl: string | undefined;
  let directRevocations: TokenRevocations | undefined;
  if (options.direct) {
    // Gateways send their headers at once; anyone else on the network who reaches the port must not hold
    // connections to it for Node's 60 s (checked every 30 s). Bodies keep Node's 300 s: a gateway streams
    // a client's body as it arrives, for up to its own bodyTimeoutMs. TCP keepalive finds a gateway whose host
    // vanished while its streams here were silent: nothing else would, before a write to it failed.
    const guard = requireBearer(options.direct.tokens, route, logger, clock);
    directRevocations = guard.revocations;
    const direct = http.createServer(
      // Node's 16 KiB would refuse, with a bare 431, a request the gateway accepted and forwards.
      { ...deadlineOptions(), ...tcpKeepAliveOptions(), maxHeaderSize: FORWARDED_HEADER_BYTES_MAX },
      guard.listener,
    );
    direct.keepAliveTimeout = SERVER_KEEP_ALIVE_MS;
    // Without a cap, a flood of connections to the pod IP is bounded only by descriptors and memory, which
    // the sandboxes share: past those the runtime dies with every session it hosts.
    const connectionsMax = options.direct.connectionsMax ?? CONNECTIONS_MAX_DEFAULT;
    capConnections(direct, { connectionsMax, metrics: options.metrics, logger, clock });
    // HTTP/1.1 has no ping: a gateway whose host vanished while an answer streams to it is found once the
    // writes back up, and the connection closed, not after the kernel's retransmission timeout.
    closeStalledWrites(direct, {
      stallTimeoutMs: options.direct.writeStallTimeoutMs ?? WRITE_STALL_TIMEOUT_MS_DEFAULT,
      metrics: options.metrics,
      logger,
      clock,
    });
    const bound = await listen(direct, { host: options.direct.host, port: options.direct.port });
    directUrl = (options.direct.advertiseUrl ?? `http://${urlHost(options.direct.host)}:{port}`).replace(
      '{port}',
      String(bound.port),
    );
    servers.push(direct);
  }

  const info: RuntimeInfo = {
    id: runtimeId,
    classes: Object.keys(options.classes).sort(),
    metadata: { ...options.metadata },
    version: options.version ?? '0.0.0',
    limits: { sandboxes: options.sandboxesMax },
    ...(directUrl ? { address: directUrl } : {}),
  };
  // The dialler's timers are unref'd and, by default, no listener is open, so
  // between two dial attempts nothing would hold the event loop: a process
  // whose scheduler went away exited silently (code 0) instead of
  // reconnecting. The node holds the process until close().
  const keepAlive = setInterval(() => {}, KEEP_ALIVE_INTERVAL_MS);
  let connectedWaiters: Array<() => void> = [];
  let watched = false;
  const dialer = dialTunnel({
    url: options.schedulerUrl,
    ...(options.fallbackSchedulerUrls?.length ? { fallbackUrls: options.fallbackSchedulerUrls } : {}),
    token: options.joinToken,
    info,
    handler: (req, res) => {
      if (!watched && (req.url ?? '').split('?', 1)[0] === '/watch') {
        watched = true;
        options.onTunnelEvent?.({ type: 'watched' });
      }
      route(req, res);
    },
    relayHandler: route,
    clock,
    logger,
    ...(options.tunnelPingIntervalMs !== undefined ? { pingIntervalMs: options.tunnelPingIntervalMs } : {}),
    ...(options.tunnelTransport !== undefined ? { transport: options.tunnelTransport } : {}),
    // The dialer logs each connect and disconnect itself.
    onDialling: () => options.onTunnelEvent?.({ type: 'dialling' }),
    onDialFailed: (reason) => options.onTunnelEvent?.({ type: 'failed', reason }),
    onConnected: () => {
      const waiters = connectedWaiters;
      connectedWaiters = [];
      for (const resolve of waiters) resolve();
      watched = false;
      options.onTunnelEvent?.({ type: 'up' });
    },
    onDisconnected: (reason) => options.onTunnelEvent?.({ type: 'down', reason }),
  });
  registerNodeMetrics(options.metrics, host, () => dialer.connected);

  let closing: Promise<void> | undefined;
  return {
    runtimeId,
    get connected() {
      return dialer.connected;
    },
    get replaced() {
      return dialer.replaced;
    },
    sidecarUrl,
    directUrl,
    stats: () => host.stats(),
    whenConnected: () =>
      dialer.connected ? Promise.resolve() : new Promise<void>((resolve) => connectedWaiters.push(resolve)),
    async drain() {
      store.drain();
      const { sandboxes, sessions } = host.stats();
      logger.info({ sandboxes, sessions }, 'draining: no new sandbox is placed here; the sessions held here go on');
      while (!closing && (host.stats().sandboxes > 0 || host.stats().sessions > 0)) {
        await sleep(clock, DRAIN_CHECK_MS);
      }
    },
    close() {
      closing ??= (async () => {
        clearInterval(keepAlive);
        directRevocations?.close();
        // GOAWAY first: schedulers open no new stream here, and the requests in flight get
        // CLOSE_GRACE_MS to finish. Closing the host then ends the sessions' GET streams, and
        // with its last stream the tunnel goes (or, at the latest, a second after the grace).
        const tunnelClosed = dialer.close(CLOSE_GRACE_MS + 1000);
        watch.close();
        await host.close(CLOSE_GRACE_MS);
        await tunnelClosed;
        store.close();
        await Promise.all(servers.map((s) => closeServer(s, { timeoutMs: 2000 })));
      })();
      return closing;
    },
  };
}

/**
 * Admits requests bearing one of the tokens listed now. An empty list (a
 * token file emptied) refuses everything rather than opening the listener,
 * and says so once each time the list becomes empty. A list that changes (a
 * function) ends, within REVOCATION_CHECK_MS of a change, every request in
 * progress whose token it no longer holds: an event stream, let in once,
 * may otherwise go on for hours on a token removed because it leaked.
 */
function requireBearer(
  tokens: readonly string[] | (() => readonly string[]),
  next: http.RequestListener,
  logger: RuntimeLogger,
  clock: Clock,
): { listener: http.RequestListener; revocations: TokenRevocations | undefined } {
  const listed = typeof tokens === 'function' ? tokens : () => tokens;
  const revocations =
    typeof tokens === 'function'
      ? watchTokenRevocations({
          tokens,
          clock,
          onRevoked: (ended) => logger.warn({ ended }, 'closed direct requests whose token was removed'),
        })
      : undefined;
  let seen: readonly string[] | undefined;
  const listener: http.RequestListener = (req, res) => {
    const accepted = listed();
    if (accepted !== seen) {
      if (accepted.length === 0 && seen?.length !== 0) {
        logger.error({}, 'the direct listener has no token: it refuses every request until one is listed');
      }
      seen = accepted;
    }
    const { authorization } = req.headers;
    if (!bearerMatches(authorization, accepted)) {
      res.writeHead(401, {
        'content-type': 'application/json',
        'www-authenticate': `Bearer realm="${RUNTIME_DIRECT_REALM}"`,
      });
      res.end(JSON.stringify({ error: 'a valid bearer token is required', code: 'unauthorized' }));
      return;
    }
    if (revocations) {
      const release = revocations.hold(
        () => bearerMatches(authorization, listed()),
        () => res.destroy(),
      );
      res.once('close', release);
    }
    next(req, res);
  };
  return { listener, revocations };
}
