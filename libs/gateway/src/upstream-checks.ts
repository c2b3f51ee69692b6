import type { Socket } from 'node:net';
import type { buildConnector } from 'undici';
import type { Clock, Timer } from '@switchyard/clock';
import type { GatewayLogger } from './options.ts';

/** Code of the error that ends the requests on a silent upstream's connections: they were sent, so they are not retried. */
export const UPSTREAM_SILENT = 'SWITCHYARD_UPSTREAM_SILENT';
/** Code of a dial not made because its upstream is silent: nothing was sent (a connect failure). */
export const UPSTREAM_SILENT_NOT_DIALLED = 'SWITCHYARD_UPSTREAM_SILENT_NOT_DIALLED';
/** How long a silent upstream nobody dials any more is remembered (pod addresses come and go). */
const SILENT_REMEMBERED_MS = 60_000;
/** Upstreams watched at most; past it, new connections go unwatched. */
const WATCHED_MAX = 4096;

interface Watched {
  readonly origin: string;
  readonly sockets: Set<Socket>;
  /** A check is out and has not been answered yet. */
  checking: boolean;
  /** When it went silent (monotonic), or undefined while it answers. */
  silentSince: number | undefined;
}

/** Which upstream a watched socket belongs to; kept beside the socket, which is undici's, not on it. */
const watchedBy = new WeakMap<Socket, Watched>();

// Not `import http from 'node:http'`: that builds the module's ESM namespace
// by reading every export, and three of them are getters that load Node's
// bundled fetch, about 2 MB of RSS in every gateway, which never uses it
// (see apps/gateway/src/main.ts). getBuiltinModule hands over the module as it is.
const http = process.getBuiltinModule('node:http');
const https = process.getBuiltinModule('node:https');

/**
 * Liveness of the upstreams the gateway holds HTTP/1.1 connections to:
 * scheduler replicas (relay connections, `/api/proxy`) and, in direct mode,
 * runtimes. HTTP/1.1 has no ping, and an upstream that froze or was cut
 * off by the network takes a request and never answers: its requests would
 * wait the idle timeout (minutes), while the scheduler has long noticed
 * (a runtime's tunnel pings fail; a runtime redials another replica). So
 * while connections to an upstream are open, it is asked `GET /healthz`
 * once every `intervalMs`. Any answer will do, even a refusal; a check still
 * unanswered at the next one, or one that fails, makes the upstream
 * silent: its connections are destroyed, failing the requests on them
 * (they were sent, so they end in a 502 and are not replayed), and it is
 * not dialled until a check is answered again. A request for it meanwhile
 * fails to dial at once, which routing treats as any connect failure: it
 * follows a runtime to the replica it redialled, or reports it lost.
 */
export class UpstreamChecks {
  readonly #upstreams = new Map<string, Watched>();
  readonly #intervalMs: number;
  readonly #clock: Clock;
  readonly #check: (origin: string, timeoutMs: number) => Promise<unknown>;
  readonly #logger: GatewayLogger;
  /** One listener shared by every watched socket (called with the socket as `this`), so a socket holds no closure. */
  readonly #onSocketClose: (this: Socket) => void;
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
    const forget = (watched: Watched): void => this.#forgetIfIdle(watched);
    this.#onSocketClose = function (this: Socket) {
      const watched = watchedBy.get(this);
      if (!watched) return;
      watched.sockets.delete(this);
      forget(watched);
    };
  }

  /** Watches `origin` while `socket`, a connection to it, is open. */
  track(origin: string, socket: Socket): void {
    if (this.#closed) return;
    let watched = this.#upstreams.get(origin);
    if (!watched) {
      if (this.#upstreams.size >= WATCHED_MAX) return;
      watched = { origin, sockets: new Set(), checking: false, silentSince: undefined };
      this.#upstreams.set(origin, watched);
    }
    watched.sockets.add(socket);
    watchedBy.set(socket, watched);
    socket.on('close', this.#onSocketClose);
    this.#timer ??= this.#clock.setTimeout(this.#tick, this.#intervalMs);
  }

  /** True while `origin` is silent: a connection dialled there would only hang. */
  silent(origin: string): boolean {
    return this.#upstreams.get(origin)?.silentSince !== undefined;
  }

  /** `connector` (undici's) with its connections watched and no dial to a silent upstream. */
  watching(connector: buildConnector.connector): buildConnector.connector {
    return (options, callback) => {
      const origin = `${options.protocol}//${options.host ?? options.hostname}`;
      if (this.silent(origin)) return process.nextTick(callback, notDialled(origin), null);
      connector(options, (error, socket) => {
        if (socket) this.track(origin, socket);
        (callback as (e: Error | null, s: Socket | null) => void)(error, socket);
      });
    };
  }

  close(): void {
    this.#closed = true;
    this.#timer?.cancel();
    this.#timer = undefined;
    this.#upstreams.clear();
  }

  readonly #tick = (): void => {
    this.#timer = undefined;
    const now = this.#clock.monotonicNow();
    for (const watched of this.#upstreams.values()) {
      if (watched.silentSince !== undefined && watched.sockets.size === 0) {
        if (now - watched.silentSince >= SILENT_REMEMBERED_MS) {
          this.#upstreams.delete(watched.origin);
          continue;
        }
      }
      if (watched.checking) {
        this.#silence(watched);
        continue;
      }
      watched.checking = true;
      this.#check(watched.origin, this.#intervalMs).then(
        () => {
          watched.checking = false;
          if (watched.silentSince !== undefined) {
            watched.silentSince = undefined;
            this.#logger.info({ upstream: watched.origin }, 'upstream answers again; it is dialled again');
          }
          this.#forgetIfIdle(watched);
        },
        () => {
          watched.checking = false;
          // A check cut short by the gateway closing says nothing of the upstream.
          if (!this.#closed) this.#silence(watched);
        },
      );
    }
    if (this.#upstreams.size > 0 && !this.#closed) this.#timer = this.#clock.setTimeout(this.#tick, this.#intervalMs);
  };

  #silence(watched: Watched): void {
    if (watched.silentSince === undefined) {
      watched.silentSince = this.#clock.monotonicNow();
      this.#logger.warn(
        { upstream: watched.origin, connections: watched.sockets.size, checkMs: this.#intervalMs },
        'upstream stopped answering; closed its connections',
      );
    }
    for (const socket of watched.sockets) {
      const error = new Error(`upstream ${watched.origin} stopped answering`);
      socket.destroy(Object.assign(error, { code: UPSTREAM_SILENT }));
    }
  }

  /** Stops watching an upstream with no connection left, unless it is silent (it is checked until it answers). */
  #forgetIfIdle(watched: Watched): void {
    if (watched.sockets.size > 0 || watched.silentSince !== undefined || watched.checking) return;
    if (this.#upstreams.get(watched.origin) === watched) this.#upstreams.delete(watched.origin);
  }
}

/** The error a dial to a silent upstream fails with at once. */
export function notDialled(origin: string): Error {
  const error = new Error(`not dialled: upstream ${origin} stopped answering`);
  return Object.assign(error, { code: UPSTREAM_SILENT_NOT_DIALLED });
}

/**
 * One check: `GET /healthz` on `origin`, resolving on any answer, failing on
 * none within `timeoutMs`. Each goes on a connection of its own (Node's
 * client, no agent), so a check of a frozen upstream never holds a pooled
 * connection that schedule calls or proxied requests would then wait on.
 */
export function checkHealthz(origin: string, timeoutMs: number): Promise<void> {
  return new Promise((resolve, reject) => {
    const url = new URL('/healthz', origin);
    const client = url.protocol === 'https:' ? https : http;
    const req = client.get(url, { agent: false, timeout: timeoutMs }, (res) => {
      res.resume();
      resolve();
    });
    req.on('timeout', () => req.destroy(new Error(`no answer from ${origin} within ${timeoutMs} ms`)));
    req.on('error', reject);
  });
}
