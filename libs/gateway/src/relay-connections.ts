import type { IncomingHttpHeaders } from 'node:http';
import net from 'node:net';
import tls from 'node:tls';
import { Pool, errors, type Dispatcher, type buildConnector } from 'undici';
import type { Clock } from '@switchyard/clock';
import { PROXY_ERRORS, PROXY_ERROR_HEADER, RELAY } from '@switchyard/protocol';
import type { Dispatch } from './http2-streams.ts';
import { notDialled, type UpstreamChecks } from './upstream-checks.ts';

const PROXY_PREFIX = '/api/proxy/';
/** How long requests for a relay that was refused go through `/api/proxy` before it is asked for again. */
const REFUSED_MS = 30_000;
/**
 * The same for a relay refused because the runtime's tunnel was full: as
 * long as the scheduler's `Retry-After`. Meanwhile requests go on kept
 * `/api/proxy` connections, whose tunnel streams end with each request,
 * instead of dialling a relay each only to be refused.
 */
const REFUSED_FULL_MS = 1_000;
/**
 * Relays one gateway keeps open per (scheduler, runtime). Each holds one of
 * the runtime's tunnel streams (4,096 by default) for as long as it is kept
 * alive, busy or idle, so a burst of calls to one runtime would otherwise
 * leave as many idle relays holding streams for a minute after it, and the
 * runtime's event streams refused. Requests past this many in flight go
 * through `/api/proxy`, whose tunnel streams end with each request.
 */
const RELAYS_PER_RUNTIME = 128;
/** Largest answer head to a relay request; a scheduler's is a few dozen bytes. */
const HEAD_BYTES_MAX = 16 * 1024;
const REFUSED = 'SWITCHYARD_RELAY_REFUSED';
/** A relay refused because the runtime's tunnel carried as many streams as the runtime takes. */
const REFUSED_FULL = 'SWITCHYARD_RELAY_REFUSED_FULL';
/**
 * A request dispatched while its relays carry RELAYS_PER_RUNTIME already (a
 * connect retry, which does not ask `covers` again): failed before any byte
 * left, sent through `/api/proxy`, and not remembered as a refusal.
 */
const BUSY = 'SWITCHYARD_RELAYS_BUSY';
/** Refusals remembered before the expired ones are swept (runtime ids come and go). */
const REFUSALS_SWEPT_AT = 1024;

/**
 * Requests bound for a tunnelled runtime (`…/api/proxy/<runtime>/<path>`
 * URLs), sent on relay connections: keep-alive HTTP/1.1 connections that
 * the scheduler replica carries whole into the runtime's tunnel (protocol.md
 * §7). The scheduler then copies bytes instead of proxying each request, and
 * the runtime serves them as HTTP/1.1 on a stream that outlives the request;
 * the request and its answer are the same bytes as through `/api/proxy`.
 *
 * One undici pool per (scheduler, runtime), dropped once it has no
 * connection left, and replaced (the old one closing once its requests have
 * ended) when the token changes or the runtime's tunnel is full (`shed`).
 * Each relay holds one of the runtime's tunnel streams while it is open, so
 * a relay takes requests only while fewer than RELAYS_PER_RUNTIME are in
 * flight on its pool (`covers`; one dispatched past that without asking, as
 * a connect retry is, fails with an error `refused` knows).
 *
 * A refused relay (the runtime is not connected to that replica, or is of a
 * release without relay connections) fails its requests before any byte of
 * them left, with an error `refused` recognises; the caller sends them
 * through `/api/proxy` instead, and does so for that relay for the next
 * REFUSED_MS (REFUSED_FULL_MS when the tunnel was full). Everything else is
 * as for any upstream connection: a scheduler that cannot be reached fails
 * with the socket's error code (see isConnectFailure), a connection that
 * breaks fails the request in flight.
 */
export class RelayConnections implements Dispatch {
  /** Relay key → the pool of its relays; a pool is dropped once it has no connection left. */
  readonly #pools = new Map<string, Pool>();
  /** Pools no longer handed requests, finishing those in flight before they close. */
  readonly #closing = new Set<Pool>();
  readonly #newPool: (relay: URL, authorization: string | undefined) => Pool;
  /** The `Authorization` that the relays of `#pools` present. */
  #presenting: string | undefined;
  readonly #authorization: (() => string | undefined) | undefined;
  readonly #clock: Clock;
  /** Relay key → `Clock.monotonicNow()` reading until which it is not asked for. */
  readonly #refusedUntil = new Map<string, number>();
  readonly #onRefused: (relay: string, error: Error) => void;
  /** Relay key → requests in flight on its relays, for the ones with any. */
  readonly #inFlight = new Map<string, number>();
  readonly #perRuntime: number;
  readonly #onLimit: () => void;
  #closed = false;

  constructor(options: {
    keepAliveTimeout: number;
    connectTimeout: number;
    clock: Clock;
    /**
     * `Authorization` on each relay's upgrade (the schedulers' API token),
     * asked at every request; the requests a relay carries go without. When
     * it changes, the relays dialled with the earlier one take no more
     * requests and close once their requests in flight have ended, so that
     * none is left for the schedulers to cut when they drop that token.
     */
    authorization?: () => string | undefined;
    /** Told of each refusal that starts a REFUSED_MS spell (not of the requests failed with it). */
    onRefused?: (relay: string, error: Error) => void;
    /** Watches the replicas relays are open to (closed by its owner); a silent one's relays are closed and not dialled. */
    checks?: UpstreamChecks;
    /** Requests in flight per relay before more go through `/api/proxy`; default RELAYS_PER_RUNTIME. */
    relaysPerRuntime?: number;
    /** Told of each request `covers` turns away because its relay carries `relaysPerRuntime` already. */
    onLimit?: () => void;
  }) {
    this.#clock = options.clock;
    this.#perRuntime = options.relaysPerRuntime ?? RELAYS_PER_RUNTIME;
    this.#onRefused = options.onRefused ?? (() => {});
    this.#onLimit = options.onLimit ?? (() => {});
    this.#authorization = options.authorization;
    const { keepAliveTimeout, connectTimeout, checks } = options;
    this.#newPool = (relay, authorization) =>
      new Pool(relay.origin, {
        keepAliveTimeout,
        // The connector asks for HTTP/1.1 only; without this, an https: pool
        // would hold every request behind its first connection while it
        // learns whether the scheduler speaks HTTP/2.
        allowH2: false,
        connect: relayConnector(relay, connectTimeout, () => authorization, checks),
      });
    this.#presenting = this.#authorization?.();
  }

  /**
   * True when a relay may be tried for `url` now: a scheduler proxy URL whose
   * relay was not refused lately and has a connection to spare (fewer than
   * `relaysPerRuntime` requests in flight on its relays); never once closed.
   */
  covers(url: string): boolean {
    const key = relayKeyOf(url);
    if (key === undefined || this.#closed || this.#atLimit(key)) return false;
    const until = this.#refusedUntil.get(key);
    if (until === undefined) return true;
    if (this.#clock.monotonicNow() < until) return false;
    this.#refusedUntil.delete(key);
    return true;
  }

  /**
   * True when `error` is a refusal of the relay for `url` (remembered for
   * REFUSED_MS, or REFUSED_FULL_MS for a full tunnel): send through `/api/proxy`.
   */
  refused(url: string, error: unknown): boolean {
    const code = (error as { code?: unknown } | undefined)?.code;
    if (code === BUSY) return true;
    if (code !== REFUSED && code !== REFUSED_FULL) return false;
    const key = relayKeyOf(url);
    if (key === undefined) return true;
    const now = this.#clock.monotonicNow();
    const known = (this.#refusedUntil.get(key) ?? 0) > now;
    if (!known && this.#refusedUntil.size >= REFUSALS_SWEPT_AT) {
      for (const [k, until] of this.#refusedUntil) if (until <= now) this.#refusedUntil.delete(k);
    }
    this.#refusedUntil.set(key, now + (code === REFUSED_FULL ? REFUSED_FULL_MS : REFUSED_MS));
    // A full tunnel is the runtime's load, not the relay's trouble; what /api/proxy answers tells the client.
    if (!known && code === REFUSED) this.#onRefused(key, error as Error);
    return true;
  }

  /** Relays remembered as refused: those in their REFUSED_MS, and expired ones not yet swept. */
  get refusalsRemembered(): number {
    return this.#refusedUntil.size;
  }

  /** Requests in flight on the relays for `url` (0 for a URL no relay covers). */
  inFlight(url: string): number {
    const key = relayKeyOf(url);
    return key === undefined ? 0 : (this.#inFlight.get(key) ?? 0);
  }

  /** Sends a request for a URL `covers` accepted, its path past the runtime's segment; once closed, fails it. */
  dispatch(options: Dispatcher.DispatchOptions, handler: Dispatcher.DispatchHandler): boolean {
    // A request still being routed when the gateway closed would open a pool nothing destroys.
    if (this.#closed) throw new errors.ClientClosedError();
    const { runtime, rest } = proxyPathOf(options.path)!;
    const key = `${String(options.origin)}${RELAY.path}${runtime}`;
    if (this.#atLimit(key)) {
      throw Object.assign(new Error(`relays to runtime ${runtime} carry ${this.#perRuntime} requests already`), {
        code: BUSY,
      });
    }
    const authorization = this.#authorization?.();
    if (authorization !== this.#presenting) {
      this.#presenting = authorization;
      for (const relay of [...this.#pools.keys()]) this.#retire(relay);
    }
    this.#inFlight.set(key, (this.#inFlight.get(key) ?? 0) + 1);
    const counted = new CountedCall(handler, () => {
      const left = this.#inFlight.get(key)! - 1;
      if (left === 0) this.#inFlight.delete(key);
      else this.#inFlight.set(key, left);
    });
    try {
      return this.#poolOf(key).dispatch({ ...options, path: rest }, counted);
    } catch (error) {
      counted.settle();
      throw error;
    }
  }

  /**
   * Closes the idle relays for `url` now, and its busy ones once their
   * requests have ended; later requests dial new ones. For a runtime whose
   * tunnel is full: each relay holds one of its streams, idle or not.
   */
  shed(url: string): void {
    const key = relayKeyOf(url);
    if (key !== undefined) this.#retire(key);
  }

  /** Pools no longer handed requests that still have some in flight. */
  get closing(): number {
    return this.#closing.size;
  }

  close(): Promise<void> {
    this.#closed = true;
    const pools = [...this.#pools.values(), ...this.#closing];
    this.#pools.clear();
    this.#closing.clear();
    return Promise.all(pools.map((pool) => pool.destroy())).then(() => undefined);
  }

  /** True, and told to `onLimit`, when the relays of `key` carry `relaysPerRuntime` requests already. */
  #atLimit(key: string): boolean {
    if ((this.#inFlight.get(key) ?? 0) < this.#perRuntime) return false;
    this.#onLimit();
    return true;
  }

  #poolOf(key: string): Pool {
    const known = this.#pools.get(key);
    if (known) return known;
    const pool = this.#newPool(new URL(key), this.#presenting);
    // As undici's Agent does: a pool whose last connection closed is dropped,
    // once the requests that failed with it have left its queue.
    const dropIfUnused = (deferred = false): void => {
      if (this.#pools.get(key) !== pool) return;
      const { connected, pending } = pool.stats;
      if (connected > 0) return;
      if (pending > 0) return deferred ? undefined : queueMicrotask(() => dropIfUnused(true));
      this.#pools.delete(key);
      void pool.close();
    };
    pool.on('disconnect', () => dropIfUnused()).on('connectionError', () => dropIfUnused());
    this.#pools.set(key, pool);
    return pool;
  }

  /** Hands the relay's later requests to a new pool; the current one closes once its requests have ended. */
  #retire(key: string): void {
    const pool = this.#pools.get(key);
    if (!pool) return;
    this.#pools.delete(key);
    this.#closing.add(pool);
    const closed = (): void => void this.#closing.delete(pool);
    void pool.close().then(closed, closed);
  }
}

/** A request's handler, passed through, that calls `onSettled` once when its answer ends or fails. */
class CountedCall implements Dispatcher.DispatchHandler {
  readonly #inner: Dispatcher.DispatchHandler;
  #onSettled: (() => void) | undefined;

  constructor(inner: Dispatcher.DispatchHandler, onSettled: () => void) {
    this.#inner = inner;
    this.#onSettled = onSettled;
  }

  settle(): void {
    const onSettled = this.#onSettled;
    this.#onSettled = undefined;
    onSettled?.();
  }

  onRequestStart(controller: Dispatcher.DispatchController, context: unknown): void {
    this.#inner.onRequestStart?.(controller, context);
  }

  onResponseStart(
    controller: Dispatcher.DispatchController,
    statusCode: number,
    headers: IncomingHttpHeaders,
    statusMessage?: string,
  ): void {
    this.#inner.onResponseStart?.(controller, statusCode, headers, statusMessage);
  }

  onResponseData(controller: Dispatcher.DispatchController, chunk: Buffer): void {
    this.#inner.onResponseData?.(controller, chunk);
  }

  onResponseEnd(controller: Dispatcher.DispatchController, trailers: IncomingHttpHeaders): void {
    this.settle();
    this.#inner.onResponseEnd?.(controller, trailers);
  }

  onResponseError(controller: Dispatcher.DispatchController, error: Error): void {
    this.settle();
    this.#inner.onResponseError?.(controller, error);
  }
}

/** `http(s)://scheduler/api/relay/<runtime>` for `http(s)://scheduler/api/proxy/<runtime>/…`, else undefined. */
function relayKeyOf(url: string): string | undefined {
  if (!url.startsWith('http://') && !url.startsWith('https://')) return undefined;
  const pathAt = url.indexOf('/', url.indexOf('//') + 2);
  const proxied = pathAt === -1 ? undefined : proxyPathOf(url.slice(pathAt));
  return proxied ? `${url.slice(0, pathAt)}${RELAY.path}${proxied.runtime}` : undefined;
}

/** `/api/proxy/<runtime><rest>` split, the runtime segment still encoded; undefined for any other path. */
function proxyPathOf(path: string): { runtime: string; rest: string } | undefined {
  if (!path.startsWith(PROXY_PREFIX)) return undefined;
  const slash = path.indexOf('/', PROXY_PREFIX.length);
  const runtime = path.slice(PROXY_PREFIX.length, slash === -1 ? path.length : slash);
  return runtime ? { runtime, rest: slash === -1 ? '/' : path.slice(slash) } : undefined;
}

export type RelayConnector = (options: buildConnector.Options, callback: buildConnector.Callback) => net.Socket | void;

/**
 * An undici connector for the relay at `relay`
 * (`http(s)://scheduler/api/relay/<runtime>`): dials the scheduler (over TLS
 * for `https:`, verified against Node's default CAs as undici's own connector
 * is) and asks for the relay, with the `Authorization` that `authorization`
 * gives at that dial (a connection outlives a rotated token; the next one
 * presents the new token); hands undici the socket after the `101`, with
 * whatever followed it put back. The socket's own errors keep their codes
 * (ECONNREFUSED, a certificate's, …); no answer in time is
 * UND_ERR_CONNECT_TIMEOUT, as from undici's own connector. With `checks`,
 * an open relay is watched, and a relay to a silent replica is not dialled
 * (UpstreamChecks).
 */
export function relayConnector(
  relay: URL,
  timeoutMs: number,
  authorization?: () => string | undefined,
  checks?: UpstreamChecks,
): RelayConnector {
  const start = `GET ${relay.pathname} HTTP/1.1\r\nHost: ${relay.host}\r\n`;
  const upgrade = `Connection: Upgrade\r\nUpgrade: ${RELAY.upgrade}\r\n\r\n`;
  const secure = relay.protocol === 'https:';
  const port = Number(relay.port || (secure ? 443 : 80));
  const host = relay.hostname.replace(/^\[(.*)\]$/, '$1');
  // SNI takes host names only.
  const servername = net.isIP(host) ? undefined : host;
  return (_options, callback) => {
    if (checks?.silent(relay.origin)) return process.nextTick(callback, notDialled(relay.origin), null);
    const credentials = authorization?.();
    const request = credentials === undefined ? start + upgrade : `${start}Authorization: ${credentials}\r\n${upgrade}`;
    const socket = secure
      ? tls.connect({ host, port, ALPNProtocols: ['http/1.1'], ...(servername ? { servername } : {}) }).setNoDelay(true)
      : net.connect({ host, port, noDelay: true });
    let head: Buffer = Buffer.alloc(0);
    let done = false;
    const finish = (error: Error | null): void => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      socket.off('data', onData);
      socket.off('error', finish);
      socket.off('close', closed);
      if (!error) {
        checks?.track(relay.origin, socket);
        return callback(null, socket);
      }
      socket.destroy();
      callback(error, null);
    };
    const onData = (chunk: Buffer): void => {
      head = head.length === 0 ? chunk : Buffer.concat([head, chunk]);
      const end = head.indexOf('\r\n\r\n');
      if (end === -1) {
        if (head.length > HEAD_BYTES_MAX) finish(refusal(relay, 0, 'answer head too large'));
        return;
      }
      const status = Number(/^HTTP\/1\.[01] (\d{3})/.exec(head.toString('latin1', 0, 16))?.[1] ?? 0);
      if (status !== 101) return finish(refusal(relay, status, head.toString('utf8', 0, end + 4 + 512)));
      socket.pause();
      if (head.length > end + 4) socket.unshift(head.subarray(end + 4));
      finish(null);
    };
    // Nothing of a request was sent yet: a peer that hangs up without answering refuses too.
    const closed = (): void => finish(refusal(relay, 0, 'connection closed before an answer'));
    const timer = setTimeout(() => {
      const error = new Error(`relay connect to ${relay.host} timed out`);
      finish(Object.assign(error, { code: 'UND_ERR_CONNECT_TIMEOUT' }));
    }, timeoutMs);
    socket.once(secure ? 'secureConnect' : 'connect', () => socket.write(request));
    socket.on('data', onData);
    socket.on('error', finish);
    socket.once('close', closed);
    return socket;
  };
}

/** A refusal error for `answer` (the head and the start of the body, or why there is none). */
function refusal(relay: URL, status: number, answer: string): Error {
  const end = answer.indexOf('\r\n\r\n');
  const detail = end === -1 ? answer : answer.slice(end + 4);
  const error = new Error(`relay ${relay.pathname} refused by ${relay.host} (${status || 'no status'}): ${detail}`);
  const full = status === 503 && streamsFullHead.test(answer.slice(0, end));
  return Object.assign(error, { code: full ? REFUSED_FULL : REFUSED, status });
}

/** The refusal's error header saying the tunnel is full (any case, optional whitespace around the value). */
const streamsFullHead = new RegExp(`^${PROXY_ERROR_HEADER}:[ \\t]*${PROXY_ERRORS.streamsFull}[ \\t]*\\r?$`, 'im');
