import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import http2 from 'node:http2';
import https from 'node:https';
import type { Duplex } from 'node:stream';
import { systemClock } from '@switchyard/clock';
import { EPOCH_DEFAULTS } from '@switchyard/epoch';
import {
  CONNECTIONS_MAX_DEFAULT,
  SERVER_KEEP_ALIVE_MS,
  SERVER_TIMEOUT_CHECK_INTERVAL_MS,
  WRITE_STALL_TIMEOUT_MS_DEFAULT,
  capConnections,
  closeServer,
  closeStalledWrites,
  listen,
  metricsHandler,
  serveH2c,
  tcpKeepAliveOptions,
  type TlsPair,
} from '@switchyard/service';
import { FORWARDED_HEADER_BYTES_MAX, RELAY, runtimeStateOf } from '@switchyard/protocol';
import { createTunnelEndpoint, CONNECT_PATH, unscopedJoinTokens } from '@switchyard/tunnel';
import { handleApi, handleApiStream, handleRelay, type ApiContext } from './api.ts';
import { apiAdmission, refuseRequest, refuseStream, refuseUpgrade } from './api-auth.ts';
import { ClusterView } from './cluster-view.ts';
import { GATEWAY_PING_DEFAULTS, keepGatewayChecked } from './gateway-liveness.ts';
import { sendJson } from './http-util.ts';
import { Leadership } from './leadership.ts';
import { LocalPart } from './local-part.ts';
import { createReplicaMetrics } from './metrics.ts';
import type { SchedulerReplicaOptions } from './options.ts';
import { createLiveUi, uiStateOf } from './ui.ts';
import { UnschedulableLog } from './unschedulable-log.ts';

/**
 * How long a connection may take to send its request's headers, and, over TLS, its handshake before them:
 * the connect path answers whoever reaches it, and a runtime, gateway or peer sends both at once.
 */
const HEADERS_TIMEOUT_MS = 10_000;

/** Streams one gateway connection may hold open over HTTP/2 (idle event streams, mostly). */
const H2C_STREAMS_MAX = 16_384;

export interface SchedulerReplica {
  readonly replicaId: string;
  /** The advertised base URL, port filled in. */
  readonly url: string;
  readonly port: number;
  readonly server: http.Server | https.Server;
  readonly isLeader: boolean;
  /** Serves connections to come with this key and certificate (a replica started with `tls` only). */
  updateTls(tls: TlsPair): void;
  /** Stops leading (releasing the lease), closes tunnels and sync, then the server. Idempotent. */
  close(): Promise<void>;
}

/**
 * Starts one scheduler replica: binds its HTTP server, accepts runtime
 * tunnels, joins the election and serves the API of design brief §6.
 * Resolves once the server listens; the first epoch follows within about one
 * retry period (leader) or one cycle (follower).
 */
export async function startSchedulerReplica(options: SchedulerReplicaOptions): Promise<SchedulerReplica> {
  const clock = options.clock ?? systemClock;
  const { logger, replicaId } = options;
  // Read on scrapes only, once `part` (below) holds tunnels.
  const metrics = createReplicaMetrics(options.metrics, {
    busiestTunnelStreams: () => part.busiestTunnelStreams(),
    runtimesOverStateLimit: () => part.runtimesOverStateLimit,
    epochLagSeconds: () => (epochAgeMs() ?? 0) / 1000,
  });
  let ready = false;
  let closing: Promise<void> | undefined;
  /** When the view was last known to hold the newest epoch: a commit applied, or a cycle that changed nothing. */
  let viewCurrentAtMs = clock.monotonicNow();
  const epochAgeMs = (): number | null => (view.hasEpoch ? clock.monotonicNow() - viewCurrentAtMs : null);
  const instanceViewFreshMs = options.epoch?.staleAfterMs ?? EPOCH_DEFAULTS.staleAfterMs;

  // Over TLS, HTTP/2 goes to clients that ask for nothing else (a gateway's event streams): HTTP/2 serves
  // only /api/proxy (see handleApiStream), which browsers, curl and probes offering both would miss.
  // serveH2c below routes either kind of connection, as on plain HTTP.
  // An `Upgrade: h2c` offer (curl --http2, Java's HttpClient on http: URLs) is ignored, as RFC 9113 §3.2
  // allows: the request is served over HTTP/1.1, not taken for an upgrade this port has no handler for.
  const shouldUpgradeCallback = (req: IncomingMessage): boolean => req.headers.upgrade?.trim().toLowerCase() !== 'h2c';
  // A gateway's stream through here (HTTP/1.1, HTTP/2 or a relay) holds a stream of a runtime's tunnel: TCP
  // keepalive finds a gateway whose host vanished while its streams were silent; on HTTP/2, where its event
  // streams are (never silent: a comment every 15 s, which keeps the kernel from probing), pings do.
  // Node's 16 KiB would refuse, with a bare 431, a request the gateway accepted and forwards.
  const accepted = {
    shouldUpgradeCallback,
    maxHeaderSize: FORWARDED_HEADER_BYTES_MAX,
    connectionsCheckingInterval: SERVER_TIMEOUT_CHECK_INTERVAL_MS,
    ...tcpKeepAliveOptions(),
  };
  const server = options.tls
    ? https.createServer({
        ...options.tls,
        ...accepted,
        handshakeTimeout: HEADERS_TIMEOUT_MS,
        ALPNCallback: ({ protocols }) =>
          protocols.includes('http/1.1') ? 'http/1.1' : protocols.includes('h2') ? 'h2' : undefined,
      })
    : http.createServer(accepted);
  server.headersTimeout = HEADERS_TIMEOUT_MS;
  server.keepAliveTimeout = SERVER_KEEP_ALIVE_MS;
  // The connect path answers whoever reaches it: a flood of connections must not take the descriptors and
  // memory the tunnels held here live on.
  capConnections(server, {
    connectionsMax: options.connectionsMax ?? CONNECTIONS_MAX_DEFAULT,
    metrics: options.metrics,
    logger,
    clock,
  });
  // HTTP/1.1 has no ping: a gateway (or any caller) whose host vanished while a stream here writes to it is
  // found once the writes back up, not after the kernel's retransmission timeout. Relays are watched too;
  // HTTP/2 connections are not (set up before serveH2c, it sees only those served as HTTP/1.1): pings find those.
  closeStalledWrites(server, {
    stallTimeoutMs: options.writeStallTimeoutMs ?? WRITE_STALL_TIMEOUT_MS_DEFAULT,
    metrics: options.metrics,
    logger,
    clock,
  });
  const address = await listen(server, { host: options.host, port: options.port });
  const url = options.advertiseUrl.replace('{port}', String(address.port));

  const ui = createLiveUi({
    clock,
    state: () =>
      uiStateOf({
        replicaId,
        // A timestamp shown to people: the wall clock.
        nowMs: clock.now(),
        isLeader: leadership.isLeader,
        leader: leadership.leader,
        term: view.term,
        epoch: view.hasEpoch ? view.epoch : null,
        epochAgeMs: epochAgeMs(),
        counts: view.counts(),
        summaries: view.summaries(),
      }),
  });
  const view = new ClusterView({
    clock,
    onCommit: (epoch, term) => {
      viewCurrentAtMs = clock.monotonicNow();
      ui.notify();
      metrics.epoch.set(epoch);
      metrics.term.set(term);
      const counts = { available: 0, draining: 0, unavailable: 0 };
      for (const runtime of view.runtimes()) counts[runtimeStateOf(runtime)]++;
      for (const [state, count] of Object.entries(counts)) metrics.runtimes.set({ state }, count);
      part.reconcile((id) => view.runtime(id));
    },
    // A quiet cluster commits no new epoch; the view is still current, so the lag must not grow.
    onCurrent: () => (viewCurrentAtMs = clock.monotonicNow()),
  });
  const part = new LocalPart({
    replicaId,
    replicaUrl: url,
    clock,
    logger,
    ...(options.runtimeState ? { mirror: options.runtimeState } : {}),
    onChange: () => leadership.notifyChange(),
    onRedialWaitEnded: (outcome) => metrics.redialWaits.inc({ outcome }),
    onSuperseded: () => metrics.tunnelsSuperseded.inc(),
  });
  const endpoint = createTunnelEndpoint({
    tokens: options.joinTokens,
    maxRuntimes: options.maxRuntimes ?? 1000,
    ...(options.tunnelPingIntervalMs !== undefined ? { pingIntervalMs: options.tunnelPingIntervalMs } : {}),
    logger,
    clock,
    // A runtime id live at another replica is not taken here by a connect with another join token.
    claimedElsewhere: (runtimeId) => view.claimElsewhere(runtimeId, replicaId),
    // Nor by another runtime process started with the id (a join command copied to a second machine), while
    // a leader still confirms the epoch that shows it live. An epoch unconfirmed for as long as a leader trusts
    // a silent replica's report vouches no more (no leader, or cut off from it): a runtime restarted here must
    // not be locked out until one commits again; a duplicate process is the lesser harm.
    instanceElsewhere: (runtimeId) =>
      (epochAgeMs() ?? 0) <= instanceViewFreshMs ? view.instanceElsewhere(runtimeId, replicaId) : undefined,
    onTunnel: (tunnel) => part.attach(tunnel),
    onTunnelClosed: (tunnel, reason) => part.detach(tunnel, reason),
  });
  const leadership = new Leadership({
    replicaId,
    replicaUrl: url,
    clock,
    lock: options.lock,
    ...(options.election ? { timing: options.election } : {}),
    ...(options.epoch ? { epoch: options.epoch } : {}),
    localPart: () => part.states(),
    // Join tokens admit peers only where no peer tokens are given, as before they existed; a token scoped to
    // some runtime ids never does, since a peer reports runtimes of any id.
    peerTokens: options.peerTokens ?? (() => unscopedJoinTokens(options.joinTokens())),
    view,
    logger,
    onLeaderCommit: (info) => {
      metrics.cycleSeconds.observe(info.durationMs / 1000);
      metrics.commitBytes.observe(info.bytes);
    },
    onLeaderSnapshot: (reason) => metrics.snapshotsSent.inc({ reason }),
    onLeaderCatchUp: () => metrics.catchUpDeltas.inc(),
    onRoleChange: () => {
      metrics.isLeader.set(leadership.isLeader ? 1 : 0);
      ui.notify();
    },
  });

  const ctx: ApiContext = {
    replicaId,
    view,
    part,
    leadership,
    metrics,
    epochAgeMs,
    scheduleBodyBytesMax: options.scheduleBodyBytesMax ?? 64 * 1024,
    logger,
    unschedulableLog: new UnschedulableLog(logger, clock),
  };
  const serveMetrics = metricsHandler(options.metrics.registry);
  const api = apiAdmission(options.apiTokens, clock, (ended) =>
    logger.warn({ ended }, 'closed API connections and streams whose token was removed'),
  );

  server.on('request', (req: IncomingMessage, res: ServerResponse) => {
    const path = (req.url ?? '/').split('?', 1)[0];
    if (path === '/healthz')
      return options.probes ? options.probes.healthz(req, res) : sendJson(res, 200, { status: 'ok' });
    if (path === '/readyz') {
      if (options.probes && !closing) return options.probes.readyz(req, res);
      return sendJson(res, ready ? 200 : 503, { status: ready ? 'ready' : closing ? 'draining' : 'starting' });
    }
    if (path === '/metrics') return serveMetrics(req, res);
    if (!api.admits(req.headers.authorization)) {
      metrics.apiUnauthorized.inc();
      req.resume();
      return refuseRequest(res, path ?? '/');
    }
    api.hold(req.headers.authorization, res, () => res.destroy());
    try {
      if (ui.handle(req, res) || handleApi(ctx, req, res)) return;
    } catch (error) {
      logger.error({ err: error }, 'request failed');
      return sendJson(res, 500, { error: 'internal error', code: 'internal' });
    }
    req.resume();
    sendJson(res, 404, { error: `no route for ${req.method} ${path}`, code: 'not_found' });
  });
  // Gateways hold their event streams as HTTP/2 streams on this port (see handleApiStream).
  const gatewayPing = {
    clock,
    logger,
    intervalMs: options.gatewayPingIntervalMs ?? GATEWAY_PING_DEFAULTS.intervalMs,
    timeoutMs: options.gatewayPingTimeoutMs ?? GATEWAY_PING_DEFAULTS.timeoutMs,
    onUnanswered: () => metrics.gatewayConnectionsUnanswered.inc(),
  };
  const h2c = serveH2c(server, {
    maxConcurrentStreams: H2C_STREAMS_MAX,
    onSession: (session) => keepGatewayChecked(session, gatewayPing),
    onStream: (stream, headers) => {
      if (api.admits(headers.authorization)) {
        api.hold(headers.authorization, stream, () => stream.close(http2.constants.NGHTTP2_CANCEL));
        return handleApiStream(ctx, stream, headers);
      }
      metrics.apiUnauthorized.inc();
      refuseStream(stream);
    },
  });
  server.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    // Node takes its own error listener off an upgraded socket: a refusal written here (404, or the sync
    // path's 400/401/503) left one a peer's reset turned into an uncaught exception, ending the process.
    socket.on('error', () => {});
    const path = (req.url ?? '/').split('?', 1)[0];
    if (path === CONNECT_PATH) return endpoint.handleUpgrade(req, socket, head);
    if (path?.startsWith(RELAY.path)) {
      if (api.admits(req.headers.authorization)) {
        api.hold(req.headers.authorization, socket, () => socket.destroy());
        return handleRelay(ctx, req, socket, head);
      }
      metrics.apiUnauthorized.inc();
      return refuseUpgrade(socket);
    }
    if (leadership.syncServer.handleUpgrade(req, socket, head)) return;
    socket.end('HTTP/1.1 404 Not Found\r\nConnection: close\r\nContent-Length: 0\r\n\r\n');
  });

  leadership.start();
  ready = true;
  logger.info({ replica: replicaId, url }, 'scheduler replica listening');

  return {
    replicaId,
    url,
    port: address.port,
    server,
    get isLeader() {
      return leadership.isLeader;
    },
    updateTls(tls) {
      if (!(server instanceof https.Server)) throw new Error('this replica serves plain HTTP; start it with tls');
      server.setSecureContext(tls);
    },
    close() {
      closing ??= (async () => {
        ready = false;
        api.close();
        ui.close();
        await leadership.stop();
        endpoint.close();
        part.close();
        await Promise.all([closeServer(server, { timeoutMs: 2000 }), h2c.close(2000)]);
      })();
      return closing;
    },
  };
}
