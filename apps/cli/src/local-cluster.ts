import { createRequire } from 'node:module';
import { MemoryLeaseStore, createMemoryLock } from '@switchyard/election';
import { createGateway, createGatewayServer, type Gateway } from '@switchyard/gateway';
import { startRuntimeNode, type RuntimeNode } from '@switchyard/runtime';
import type { EngineConfig } from '@switchyard/sandbox';
import { startSchedulerReplica, type SchedulerReplica } from '@switchyard/scheduler';
import { terminalLines } from './log-lines.ts';
import {
  createLifecycle,
  createLogger,
  createMetrics,
  listen,
  withProbes,
  type Lifecycle,
  type Logger,
} from '@switchyard/service';
import { httpRequest } from './http-request.ts';
import { newJoinToken } from './join-token.ts';

export interface LocalClusterOptions {
  readonly schedulers: number;
  /** First scheduler port; the others follow. 0 picks free ports. */
  readonly schedulerPort: number;
  readonly gatewayPort: number;
  readonly logLevel: 'fatal' | 'error' | 'warn' | 'info' | 'debug';
  readonly progress: (line: string) => void;
}

export interface Component {
  readonly kind: 'scheduler' | 'gateway' | 'runtime';
  readonly name: string;
  readonly address: string;
  readonly note: string;
}

export interface LocalCluster {
  readonly gatewayUrl: string;
  readonly schedulerUrls: readonly string[];
  /** The join token runtimes of this cluster present (generated per run). */
  readonly joinToken: string;
  components(): Component[];
  close(): Promise<void>;
}

/** The `everything` class: the reference MCP server, one child process per sandbox. */
export function everythingEngine(): EngineConfig {
  const entry = createRequire(import.meta.url).resolve('@modelcontextprotocol/server-everything/dist/index.js');
  return { engine: 'stdio', command: process.execPath, args: [entry, 'stdio'], expireSeconds: 60 };
}

/**
 * Identity sources of the local gateway: the defaults plus `?class=` and
 * `?process=`, for clients that can set neither headers nor paths (a client
 * configured with one URL ending in /mcp).
 */
export const LOCAL_IDENTITY = {
  class: ['path:class', 'header:X-Switchyard-Class', 'query:class'],
  process: ['path:process', 'header:X-Switchyard-Process', 'query:process'],
};

/**
 * Browser origins the local gateway accepts: pages served from this machine
 * on any port (the MCP inspector's web UI, a local web app), as a server
 * bound to loopback should. A page of any other origin — a DNS-rebinding
 * page among them — still gets 403.
 */
export const LOCAL_ORIGINS = ['http://localhost:*', 'http://127.0.0.1:*', 'http://[::1]:*'];

/** The classes each local runtime serves. */
export function localClasses(): Record<string, EngineConfig> {
  return { demo: { engine: 'builtin', expireSeconds: 300 }, everything: everythingEngine() };
}

/**
 * What each local runtime serves and holds, in either mode (`up --processes`
 * writes it to their config file). A session nobody ends (no DELETE: a
 * Ctrl-C'd client, most CLI runs) holds its sandbox until it has been idle
 * sessionIdleMs: with the runtime app's 30 min, a hundred of them filled the
 * cluster's sandboxes and every new client got 503 until they expired. A
 * running SDK client keeps its GET stream open, which keeps its session; one
 * that holds none and sends nothing for 5 min is answered 404 and opens a
 * new session.
 * More sandboxes would not do instead: every `everything` one is a Node
 * process of about 80 MB.
 */
export function localRuntimeSettings() {
  return { classes: localClasses(), sandboxesMax: 50, sessionIdleMs: 5 * 60_000 };
}

/**
 * Everything of a cluster in this one process, on loopback, with an
 * in-memory lease: `schedulers` replicas, two runtimes and one gateway.
 * Resolves once every replica's epoch shows both runtimes.
 */
export async function startLocalCluster(options: LocalClusterOptions): Promise<LocalCluster> {
  const logger = createLogger({
    name: 'switchyard',
    level: options.logLevel,
    destination: terminalLines('switchyard'),
  });
  const token = newJoinToken();
  // The replicas' own: the runtimes' join token admits no peer to their epoch sync.
  const peerToken = newJoinToken();
  const store = new MemoryLeaseStore();
  const replicas: SchedulerReplica[] = [];
  const runtimes: RuntimeNode[] = [];
  let gateway: Gateway | undefined;
  let gatewayLifecycle: Lifecycle | undefined;
  const close = async (): Promise<void> => {
    await Promise.allSettled(runtimes.map((r) => r.close()));
    await (gatewayLifecycle?.shutdown('stopping') ?? gateway?.close());
    await Promise.allSettled(replicas.map((r) => r.close()));
  };
  try {
    for (let i = 0; i < options.schedulers; i++) {
      const port = options.schedulerPort === 0 ? 0 : options.schedulerPort + i;
      replicas.push(
        await startSchedulerReplica({
          replicaId: `scheduler-${i}`,
          advertiseUrl: 'http://127.0.0.1:{port}',
          host: '127.0.0.1',
          port,
          lock: createMemoryLock(store),
          election: { leaseDurationMs: 3000, renewDeadlineMs: 2000, retryPeriodMs: 500 },
          joinTokens: () => [token],
          peerTokens: () => [peerToken],
          logger: child(logger, `scheduler-${i}`),
          metrics: createMetrics('scheduler'),
        }),
      );
      options.progress(`scheduler-${i} listening on ${replicas[i]!.url}`);
    }
    for (let i = 0; i < 2; i++) {
      const runtime = await startRuntimeNode({
        runtimeId: `runtime-${i}`,
        schedulerUrl: replicas[i % replicas.length]!.url,
        // No Service here: the other replicas are where a runtime goes when its own is gone.
        fallbackSchedulerUrls: othersAfter(
          replicas.map((r) => r.url),
          i,
        ),
        joinToken: token,
        ...localRuntimeSettings(),
        logger: child(logger, `runtime-${i}`),
        metrics: createMetrics('runtime'),
      });
      runtimes.push(runtime);
      await runtime.whenConnected();
      options.progress(`runtime-${i} joined through ${replicas[i % replicas.length]!.replicaId}`);
    }
    const gatewayMetrics = createMetrics('gateway');
    const gatewayLogger = child(logger, 'gateway');
    gateway = createGateway({
      schedulers: replicas.map((r) => r.url),
      // Clients that name no class get the demo tools.
      defaultClass: 'demo',
      identity: LOCAL_IDENTITY,
      allowedOrigins: LOCAL_ORIGINS,
      logger: gatewayLogger,
      metrics: { registry: gatewayMetrics.registry },
    });
    // The deployed gateway's probes and metrics beside /mcp (docs/operations.md), and its stop:
    // unready, stop accepting, end the event streams, close.
    const lifecycle = createLifecycle({ drainDelayMs: 0, shutdownTimeoutMs: 1000, logger: gatewayLogger });
    const probed = withProbes(gateway.app, {
      healthz: lifecycle.healthzHandler,
      readyz: lifecycle.readyzHandler,
      registry: gatewayMetrics.registry,
    });
    // Built as the gateway app builds its own, with its defaults: clients here are held to the deadlines
    // and limits of a deployed gateway (headers, bodies, idle connections, connection cap, stalled writes).
    const gatewayServer = createGatewayServer(gateway, probed, {
      metrics: gatewayMetrics,
      logger: gatewayLogger,
    });
    const bound = await listen(gatewayServer, { host: '127.0.0.1', port: options.gatewayPort });
    lifecycle.addServer(gatewayServer);
    const started = gateway;
    lifecycle.onServersClosing(() => started.endEventStreams());
    lifecycle.onShutdown(() => started.close());
    lifecycle.markReady();
    gatewayLifecycle = lifecycle;
    const gatewayUrl = `http://127.0.0.1:${bound.port}/mcp`;
    options.progress(`gateway listening on http://127.0.0.1:${bound.port}`);
    await waitForEpochs(
      replicas.map((r) => r.url),
      runtimes.length,
    );
    options.progress('every scheduler sees every runtime');
    return {
      gatewayUrl,
      schedulerUrls: replicas.map((r) => r.url),
      joinToken: token,
      components: () => [
        ...replicas.map((r) => ({
          kind: 'scheduler' as const,
          name: r.replicaId,
          address: r.url,
          note: r.isLeader ? 'leader' : 'follower',
        })),
        { kind: 'gateway', name: 'gateway-0', address: `http://127.0.0.1:${bound.port}`, note: '/mcp' },
        ...runtimes.map((r, i) => ({
          kind: 'runtime' as const,
          name: r.runtimeId,
          address: `via ${replicas[i % replicas.length]!.replicaId}`,
          note: 'classes demo, everything',
        })),
      ],
      close,
    };
  } catch (error) {
    await close();
    throw error;
  }
}

function child(logger: Logger, component: string): Logger {
  return logger.child({ component });
}

/** Polls every replica until its latest epoch lists `count` available runtimes (bounded: 20 s). */
export async function waitForEpochs(urls: readonly string[], count: number, timeoutMs = 20_000): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    const seen = await Promise.all(
      urls.map(async (url) => {
        try {
          // Not fetch, which refuses a --scheduler-port such as 6000 (see httpRequest).
          const res = await httpRequest(`${url}/api/runtimes`, { signal: AbortSignal.timeout(5000) });
          const body = (await res.json()) as { runtimes: Array<{ available: boolean }> };
          return body.runtimes.filter((r) => r.available).length;
        } catch {
          return 0;
        }
      }),
    );
    if (seen.every((n) => n >= count)) return;
    if (performance.now() > deadline)
      throw new Error(`schedulers did not see ${count} runtimes within ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/** The URLs other than the one at `i % urls.length`, in order from the one after it. */
export function othersAfter(urls: readonly string[], i: number): string[] {
  return Array.from({ length: urls.length - 1 }, (_, k) => urls[(i + 1 + k) % urls.length]!);
}
