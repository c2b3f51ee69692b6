import type { Clock } from '@switchyard/clock';
import type { ElectionTiming, LeaseLock } from '@switchyard/election';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Metrics, TlsPair } from '@switchyard/service';

export type ProbeHandler = (req: IncomingMessage, res: ServerResponse) => void;

/** The slice of a pino logger the replica uses. */
export interface ReplicaLogger {
  debug(obj: object, msg?: string): void;
  info(obj: object, msg?: string): void;
  warn(obj: object, msg?: string): void;
  error(obj: object, msg?: string): void;
}

export interface SchedulerReplicaOptions {
  /** Unique among replicas; also the `owner` of the runtimes whose tunnels it holds. */
  readonly replicaId: string;
  /** How peers and gateways reach this replica (`http://host:port`). */
  readonly advertiseUrl: string;
  readonly host: string;
  /** 0 picks a free port; `advertiseUrl` may then use `{port}`, filled in once bound. */
  readonly port: number;
  readonly lock: LeaseLock;
  readonly election?: Partial<ElectionTiming>;
  /**
   * Join tokens accepted from runtimes, each `<token>` or `<token> <id pattern>` (admitting only the runtime ids
   * the glob matches; see the tunnel endpoint); read on every connect. Without `peerTokens`, those without a
   * pattern admit peers too.
   */
  readonly joinTokens: () => readonly string[];
  /**
   * Tokens replicas of a cluster share to sync epochs: they admit a peer on
   * `/api/sync/:replica`, and a follower presents them to its leader in
   * turn, one per attempt, until one is taken; read on every connect. None
   * (the default): the join tokens do both, so whoever holds a runtime's
   * token can sync as a follower, and report runtimes in the epochs (a
   * runtime's owner URL, say). Given, an empty list admits no peer, not
   * every runtime's token.
   */
  readonly peerTokens?: () => readonly string[];
  /**
   * Tokens gateways and operators present on the scheduler API (`/api/*`
   * but the runtimes' connect path and peers' sync, which have their own,
   * and the live page `/ui`); read on every request. None (the default): the
   * API is open to whoever reaches the port, which then must be a network
   * only gateways and peers reach. Given, an empty list refuses every
   * caller, not opens the API. Probes and `/metrics` stay open.
   */
  readonly apiTokens?: () => readonly string[];
  readonly maxRuntimes?: number;
  /** Connections the listener holds at once, of every kind; one more is closed unread (capConnections). Default 16,384. */
  readonly connectionsMax?: number;
  readonly tunnelPingIntervalMs?: number;
  /**
   * How often each HTTP/2 connection from a gateway (its event streams) is
   * pinged; one that leaves a ping unanswered for `gatewayPingTimeoutMs` is
   * destroyed with its streams, and the runtimes' streams behind them (see
   * keepGatewayChecked). Defaults GATEWAY_PING_DEFAULTS: 10 s and 10 s.
   */
  readonly gatewayPingIntervalMs?: number;
  readonly gatewayPingTimeoutMs?: number;
  /**
   * A connection of the listener (an /api/proxy request, a relay connection,
   * any HTTP/1.1 one) whose writes have waited this long with no byte taken
   * by its peer is closed, with the runtime's stream behind it: HTTP/1.1 has
   * no ping to find a peer whose host vanished (see closeStalledWrites).
   * Default WRITE_STALL_TIMEOUT_MS_DEFAULT, 60 s.
   */
  readonly writeStallTimeoutMs?: number;
  /**
   * What this replica mirrors of one runtime's state, each at most the protocol's `RUNTIME_LIMITS`. A runtime
   * reporting more takes no new sandbox until it reports less (its sessions and sandboxes go on), with an
   * error logged naming these. Default RUNTIME_STATE_DEFAULTS (100,000 processes, 1,000,000 threads: the
   * reference runtime's own limits).
   */
  readonly runtimeState?: { readonly processesMax?: number; readonly threadsMax?: number };
  readonly epoch?: {
    readonly cycleIntervalMs?: number;
    readonly cycleTimeoutMs?: number;
    readonly staleAfterMs?: number;
    readonly forgetAfterMs?: number;
    /**
     * Largest epoch sync frame a replica takes from a peer (a commit's snapshot, a follower's full part), and
     * the size past which a leader warns it sent one. Give every replica the same. Default 64 MiB.
     */
    readonly frameBytesMax?: number;
    /**
     * Largest run of parts (a snapshot or full part sent as frames) a replica takes from a peer, its frames
     * together: what a peer can make it hold for one run. Give every replica the same. Default 512 MiB.
     */
    readonly runBytesMax?: number;
  };
  /**
   * Serve HTTPS (HTTP/1.1 and HTTP/2 by ALPN) with this PEM key and
   * certificate chain instead of plain HTTP; `updateTls` swaps them for
   * connections to come. Advertise an `https:` URL then.
   */
  readonly tls?: TlsPair;
  /** Largest `POST /api/schedule` body. Default 64 KiB. */
  readonly scheduleBodyBytesMax?: number;
  /**
   * Probe handlers of the app's lifecycle (so `/readyz` turns 503 while the
   * process drains). Default: healthz always 200, readyz 200 while listening.
   */
  readonly probes?: { readonly healthz: ProbeHandler; readonly readyz: ProbeHandler };
  readonly logger: ReplicaLogger;
  readonly metrics: Metrics;
  readonly clock?: Clock;
}
