import type { Clock } from '@switchyard/clock';
import type { ElectionTiming, LeaseLock } from '@switchyard/election';
import type { Metrics } from '@switchyard/service';

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
  /** Join tokens accepted from runtimes; read on every connect. */
  readonly joinTokens: () => readonly string[];
  readonly maxRuntimes?: number;
  readonly tunnelPingIntervalMs?: number;
  readonly epoch?: {
    readonly cycleIntervalMs?: number;
    readonly cycleTimeoutMs?: number;
    readonly staleAfterMs?: number;
  };
  /** Largest `POST /api/schedule` body. Default 64 KiB. */
  readonly scheduleBodyBytesMax?: number;
  readonly logger: ReplicaLogger;
  readonly metrics: Metrics;
  readonly clock?: Clock;
}
