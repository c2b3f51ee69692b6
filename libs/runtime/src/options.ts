import type { Clock } from '@switchyard/clock';
import type { Engine, EngineConfig, MeteringSink } from '@switchyard/sandbox';
import type { Metrics } from '@switchyard/service';
import type { TunnelTransport } from '@switchyard/tunnel';

/** The slice of a pino logger the runtime uses. */
export interface RuntimeLogger {
  debug(obj: object, msg?: string): void;
  info(obj: object, msg?: string): void;
  warn(obj: object, msg?: string): void;
  error(obj: object, msg?: string): void;
}

/**
 * A step of the tunnel's dialling, for a caller that reports it (`switchyard runtime join`): a dial
 * starts (`dialling`) and ends with no tunnel (`failed`: unreachable, refused, or no answer within the
 * connect timeout, which is the tunnel's ping interval and timeout together) or with one (`up`), which
 * later goes (`down`). No dial is in flight between an end and the next `dialling`. A tunnel that is up
 * proves little (a proxy may take the upgrade and drop it): `watched` comes once per tunnel, when a
 * scheduler first opens `/watch` through it, which only one that took the runtime does.
 */
export type TunnelEvent =
  | { readonly type: 'dialling' }
  | { readonly type: 'failed'; readonly reason: string }
  | { readonly type: 'up' }
  | { readonly type: 'watched' }
  | { readonly type: 'down'; readonly reason: string };

export interface RuntimeNodeOptions {
  readonly runtimeId: string;
  /** A scheduler replica (or the Service in front of them); the tunnel is dialled from here. */
  readonly schedulerUrl: string;
  /** More replicas to dial when a dial fails, for schedulers with no Service in front of them (DialTunnelOptions.fallbackUrls). */
  readonly fallbackSchedulerUrls?: readonly string[];
  /** A function is asked at every dial of the tunnel (a token file read again when it changes). */
  readonly joinToken: string | (() => string);
  readonly classes: Readonly<Record<string, EngineConfig>>;
  /**
   * Engines that classes with `{engine: 'custom', name}` refer to, for
   * embedders and test fixtures; the runtime binary supplies none. Default none.
   */
  readonly engines?: Readonly<Record<string, Engine>>;
  readonly sandboxesMax: number;
  readonly sessionIdleMs: number;
  /** Wait after a warm-pool hand-out before its replacement starts, ms. Default: the sandbox host's (250). */
  readonly warmPoolRefillDelayMs?: number;
  readonly metadata?: Readonly<Record<string, string>>;
  /**
   * A semantic version (`isRuntimeVersion`), which `latest_version` rules rank; anything else is refused at
   * start. Default `0.0.0`.
   */
  readonly version?: string;
  /**
   * Local API for runtimes in other languages; binds 127.0.0.1 only. Off when absent; 0 takes a free port
   * (`sidecarUrl` names it). The app's `sidecarPort` config reads 0 as off instead.
   */
  readonly sidecarPort?: number;
  /**
   * A direct listener for gateways in `direct` mode. It trusts identity
   * headers, so it requires one of `tokens` as a bearer token on every
   * request; a function is asked on every request (a token file read again
   * when it changes), so a rotation can accept the old and the new token for
   * a while and then only the new one, and ends the requests in progress
   * (event streams) of a token it no longer lists. With no token listed it
   * refuses every request.
   */
  readonly direct?: {
    readonly host: string;
    readonly port: number;
    readonly tokens: readonly string[] | (() => readonly string[]);
    /** Default `http://<host>:<port>`, an IPv6 host in brackets. `{port}` is replaced by the bound port. */
    readonly advertiseUrl?: string;
    /**
     * Connections the listener holds at once (gateways' requests and event streams, idle keep-alive
     * ones, anyone else on the network); one more is closed unread (`capConnections`), counted in
     * `switchyard_runtime_connections_refused_total`. Default 16,384.
     */
    readonly connectionsMax?: number;
    /**
     * A connection whose writes have waited this long with no byte taken by its peer is closed (see
     * `closeStalledWrites`, counted in `switchyard_runtime_connections_write_stalled_total`): a gateway
     * whose host vanished while an answer streamed to it would otherwise hold the connection, and the call
     * behind it, until the kernel's retransmission timeout, about 15 minutes. Default 60 s.
     */
    readonly writeStallTimeoutMs?: number;
  };
  readonly tunnelPingIntervalMs?: number;
  /** How the tunnel carries HTTP/2 (see `TunnelTransport`). Default `auto`. */
  readonly tunnelTransport?: TunnelTransport;
  /** Told of each step of the tunnel's dialling; its log says the same for people. Default none. */
  readonly onTunnelEvent?: (event: TunnelEvent) => void;
  readonly logger: RuntimeLogger;
  readonly metrics: Metrics;
  readonly meter?: MeteringSink;
  readonly clock?: Clock;
}
