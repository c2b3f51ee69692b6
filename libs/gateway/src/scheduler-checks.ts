import type { Socket } from 'node:net';
import type { Clock, Timer } from '@switchyard/clock';
import type { GatewayLogger } from './options.ts';

/** Code of the error that ends the requests on a silent replica's relays: they were sent, so they are not retried. */
export const SCHEDULER_SILENT = 'SWITCHYARD_SCHEDULER_SILENT';
/** Code of a dial not made because its replica is silent: nothing was sent (a connect failure). */
export const SCHEDULER_SILENT_NOT_DIALLED = 'SWITCHYARD_SCHEDULER_SILENT_NOT_DIALLED';

interface Watched {
  readonly sockets: Set<Socket>;
  /** A check is out and has not been answered yet. */
  checking: boolean;
  silent: boolean;
}

/**
 * Liveness of the scheduler replicas that relay connections are open to.
 * A relay is plain HTTP/1.1, which has no ping, and a replica that froze or
 * was cut off by the network takes a request and never answers: its
 * requests would wait the idle timeout (minutes), while their runtime has
 * redialled another replica within its tunnel's ping timeout. So while
 * relay connections to a replica are open, it is asked `GET /healthz` once
 * every `intervalMs`. Any answer will do; a check still unanswered at the
 * next one, or one that fails, makes the replica silent: its relay
 * connections are destroyed, failing the requests on them (they were sent,
 * so they end in a 502 and are not replayed), and no relay to it is dialled
 * until a check is answered again. A request for one of its runtimes
 * meanwhile fails to dial at once, which is how routing learns to follow
 * the runtime to the replica it redialled.
 */
export class SchedulerChecks {
  readonly #replicas = new Map<string, Watched>();
  readonly #intervalMs: number;
  readonly #clock: Clock;
  readonly #check: (origin: string, timeoutMs: number) => Promise<unknown>;
  readonly #logger: GatewayLogger;
  #timer: Timer | undefined;
  #closed = false;

  constructor(options: {
    intervalMs: number;
    clock: Clock;
    /** Asks `origin` once; settles within `timeoutMs`, resolving on any answer. */
    check: (origin: string, timeoutMs: number) => Promise<unknown>;
    logger: GatewayLogger;
  }) {
    this.#intervalMs = options.intervalMs;
    this.#clock = options.clock;
    this.#check = options.check;
    this.#logger = options.logger;
  }

  /** Watches `origin` while `socket`, a relay connection to it, is open. */
  track(origin: string, socket: Socket): void {
    if (this.#closed) return;
    let watched = this.#replicas.get(origin);
    if (!watched) {
      watched = { sockets: new Set(), checking: false, silent: false };
      this.#replicas.set(origin, watched);
    }
    const { sockets } = watched;
    sockets.add(socket);
    socket.once('close', () => {
      sockets.delete(socket);
      this.#forgetIfIdle(origin);
    });
    this.#timer ??= this.#clock.setTimeout(this.#tick, this.#intervalMs);
  }

  /** True while `origin` is silent: a relay dialled there would only hang. */
  silent(origin: string): boolean {
    return this.#replicas.get(origin)?.silent === true;
  }

  close(): void {
    this.#closed = true;
    this.#timer?.cancel();
    this.#timer = undefined;
    this.#replicas.clear();
  }

  readonly #tick = (): void => {
    this.#timer = undefined;
    for (const [origin, watched] of this.#replicas) {
      if (watched.checking) {
        this.#silence(origin, watched);
        continue;
      }
      watched.checking = true;
      this.#check(origin, this.#intervalMs).then(
        () => {
          watched.checking = false;
          if (watched.silent) {
            watched.silent = false;
            this.#logger.info({ upstream: origin }, 'scheduler replica answers again; relays to it are dialled again');
          }
          this.#forgetIfIdle(origin);
        },
        () => {
          watched.checking = false;
          this.#silence(origin, watched);
        },
      );
    }
    if (this.#replicas.size > 0 && !this.#closed) this.#timer = this.#clock.setTimeout(this.#tick, this.#intervalMs);
  };

  #silence(origin: string, watched: Watched): void {
    if (!watched.silent) {
      watched.silent = true;
      this.#logger.warn(
        { upstream: origin, relays: watched.sockets.size, checkMs: this.#intervalMs },
        'scheduler replica stopped answering; closed its relay connections',
      );
    }
    for (const socket of watched.sockets) {
      const error = new Error(`scheduler replica ${origin} stopped answering`);
      socket.destroy(Object.assign(error, { code: SCHEDULER_SILENT }));
    }
  }

  /** Stops watching a replica with no relay left, unless it is silent (it is checked until it answers). */
  #forgetIfIdle(origin: string): void {
    const watched = this.#replicas.get(origin);
    if (watched && watched.sockets.size === 0 && !watched.silent && !watched.checking) this.#replicas.delete(origin);
  }
}

/** The error a relay dial to a silent replica fails with at once. */
export function notDialled(origin: string): Error {
  const error = new Error(`relay not dialled: scheduler replica ${origin} stopped answering`);
  return Object.assign(error, { code: SCHEDULER_SILENT_NOT_DIALLED });
}
