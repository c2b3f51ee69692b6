import type http from 'node:http';
import http2 from 'node:http2';
import { Heartbeat, systemClock } from '@switchyard/clock';
import type { Clock, Timer } from '@switchyard/clock';
import {
  HTTP2_HEADER_FIELDS_MAX,
  RUNTIME_INFO_HEADER,
  RUNTIME_INSTANCE_HEADER,
  RUNTIME_LIVENESS_HEADER,
  SwitchyardError,
} from '@switchyard/protocol';
import type { RuntimeInfo } from '@switchyard/protocol';
import { TIMER_DELAY_MS_MAX } from '@switchyard/service';
import { BACKOFF_DEFAULTS, backoffDelayMs, delayAfterMs } from './backoff.ts';
import type { BackoffOptions } from './backoff.ts';
import { CONNECT_PATH, GOAWAY_REPLACED, H2_TUNING, TUNNEL_DEFAULTS, h2Settings, silentLogger } from './defaults.ts';
import type { TunnelLogger } from './defaults.ts';
import { AutoTransport, HTTP2_RETRY_MS } from './auto-transport.ts';
import { FlapLog, GOOD_AFTER_PINGS } from './flap-log.ts';
import { newInstanceId } from './instance.ts';
import { livenessHeaderValue, type Liveness } from './liveness.ts';
import { LengthDeclaringResponse } from './response.ts';
import type { Carrier, CarrierTransport, TunnelTransport } from './carrier.ts';
import { connectCarrier } from './connect.ts';
import { serveRelayConnections, type RelayServer } from './relay-connection.ts';

export interface DialTunnelOptions {
  /** Scheduler base URL, `http(s)://` or `ws(s)://`; `/api/runtime/connect` is appended. */
  readonly url: string;
  /**
   * More scheduler replicas, for schedulers with no Service in front of
   * them: a dial that fails moves on to the next URL (after `url`, in
   * order, round and round), so a runtime whose replica died joins another.
   * A lost tunnel is redialled where it was first.
   */
  readonly fallbackUrls?: readonly string[];
  /** How the tunnel's HTTP/2 travels (see `TunnelTransport`). Default `auto`. */
  readonly transport?: TunnelTransport;
  /**
   * The join token; a function is asked at every dial, so a rotated token
   * file is used from the next one, and every second while refused with 401.
   */
  readonly token: string | (() => string);
  readonly info: RuntimeInfo;
  /**
   * This runtime process's instance id, sent on every dial (`X-Runtime-Instance`): a replica lets it take
   * over its own earlier tunnel at once (there or at another replica), and refuses (409) another process
   * with the same id while that one's tunnel is live (there, or at another replica as its view shows). Default: drawn at random by this dialer; give one dialer per process. `null`
   * names none, as runtimes of earlier releases (tests of mixed releases).
   */
  readonly instance?: string | null;
  /** Serves every stream the scheduler opens, on http2 compat objects (not express). */
  readonly handler: (req: http2.Http2ServerRequest, res: http2.Http2ServerResponse) => void;
  /**
   * Serves the requests of relay connections (HTTP/1.1 on CONNECT streams,
   * see `relay-connection.ts`); normally the same routes as `handler`.
   * Without it a CONNECT stream is refused (405) and gateways use `/api/proxy`.
   */
  readonly relayHandler?: http.RequestListener;
  /**
   * Liveness probe period. Default 5000 ms. With `pingTimeoutMs`, at most
   * 2^31 - 1 ms together: a dial waits both in one timer.
   */
  readonly pingIntervalMs?: number;
  /** Default = pingIntervalMs. */
  readonly pingTimeoutMs?: number;
  readonly backoff?: BackoffOptions;
  readonly clock?: Clock;
  readonly logger?: TunnelLogger;
  /** Source of jitter; default Math.random. */
  readonly random?: () => number;
  /** A dial starts; it ends in `onConnected` or `onDialFailed`. */
  readonly onDialling?: () => void;
  /** A dial ended with no tunnel: unreachable, refused, or no answer within the connect timeout. */
  readonly onDialFailed?: (reason: string) => void;
  readonly onConnected?: () => void;
  readonly onDisconnected?: (reason: string) => void;
}

/** How long a runtime whose id another runtime took waits before dialling again. */
const REPLACED_REDIAL_MS = 5 * 60_000;

/**
 * How long after the time a 409 names for a held id to be free (`droppedIfSilentInMs`) the dialer dials
 * again: the replica drops the holder's tunnel only once that time has passed, and the dial takes a moment.
 */
export const HELD_ID_REDIAL_MARGIN_MS = 250;

/** While refused with 401, how often a token given as a function is asked whether it changed. */
const TOKEN_RECHECK_MS = 1_000;

/** Failed dials in a row between two `scheduler unreachable` lines (the first is logged). */
const UNREACHABLE_LOGGED_EVERY = 10;

/** The runtime's side: keeps one tunnel to the scheduler up. */
export interface TunnelDialer {
  /** True while a tunnel is open. */
  readonly connected: boolean;
  /** True from the scheduler saying another runtime with this id replaced this one's tunnel until it is connected again. */
  readonly replaced: boolean;
  /**
   * GOAWAY to the scheduler (no new streams) and stop reconnecting; the
   * streams in flight get `graceMs` (default 1 s) to finish before the
   * connection goes. Resolves once it has gone. Idempotent.
   */
  close(graceMs?: number): Promise<void>;
}

/**
 * Dials the scheduler and serves HTTP/2 on the upgraded connection,
 * reconnecting forever with exponential backoff and jitter (250 ms doubling
 * to 30 s by default). The backoff starts over once a tunnel has answered
 * GOOD_AFTER_PINGS pings (two ping intervals, 10 s by default), so a runtime that lost a
 * good tunnel redials at the first step; each tunnel in a row dropped
 * sooner (a proxy cutting it after the upgrade, a scheduler refusing it
 * once taken) moves the next redial a step on, so such a tunnel is not
 * redialled every 250 ms for ever. With transport
 * `auto` every dial asks for `http2` first and, when a reached peer answers
 * anything but that upgrade (or a 401, 431 or 503), dials again at once for
 * `websocket`; after two `http2` tunnels in a row on which the scheduler
 * never spoke HTTP/2 (a front that answers the upgrade and drops it), dials
 * ask for `websocket` for 30 minutes (see `AutoTransport`). A 400/401 refusal is logged with its status and body and
 * retried at the maximum delay, since it will not heal by itself soon; a 401
 * is retried at once should the token (given as a function) change first. A
 * tunnel that the scheduler closed because another runtime connected with
 * the same id (GOAWAY_REPLACED) is dialled again only after 5 minutes, not
 * at once: the two would take the id from each other for as long as both run. Every dial names this
 * runtime's instance (see `instance`), so a replica refuses it (409) while another runtime that runs
 * holds the id (at that replica or, as its view shows, at another), and lets it take its own earlier tunnel
 * over at once; a 409 that says when the holder's tunnel is dropped should it stay silent
 * (`droppedIfSilentInMs`) is dialled again HELD_ID_REDIAL_MARGIN_MS after that (jittered later, at most the
 * maximum delay), as a runtime restarted over its silent earlier tunnel joins then. Not guaranteed: that
 * requests in flight survive a reconnect (they fail; the scheduler decides
 * about retries).
 * Throws `SwitchyardError(invalid_request)` when `pingIntervalMs +
 * pingTimeoutMs` is past 2^31 - 1 ms, before it dials.
 */
export function dialTunnel(options: DialTunnelOptions): TunnelDialer {
  return new Dialer(options);
}

/**
 * Refusals about the runtime (token, its scope, an id held with another token, size) or the scheduler
 * (capacity), not the transport: a WebSocket would fare no better.
 */
const REFUSALS_OF_ANY_TRANSPORT = new Set([401, 403, 409, 431, 503]);
/** What a refusal asks of the runtime's operator, where its status alone does not say. */
const REFUSAL_HINTS = new Map([
  [
    403,
    "this join token's runtime id pattern does not admit this runtime's id: use an id it names, or a token scoped to this id",
  ],
  [
    409,
    "this runtime's id is connected to the scheduler cluster with another join token: another runtime uses the same id (give each its own), or this runtime's earlier tunnel, opened with its previous token, is not yet found dead (it joins once it is)",
  ],
]);
/** The 409 body's `error` for an id that another runtime process holds with the same token. */
const HELD_BY_LIVE_RUNTIME = 'runtime id held by another live runtime';
const HELD_BY_LIVE_RUNTIME_HINT =
  "another runtime that runs holds this runtime's id: give each runtime its own id (this one joins once that one's tunnel closes, as when a restarted runtime's earlier tunnel is found dead)";

/** What a refusal asks of the operator, from its status and, for a 409, which one its body says it is. */
function refusalHint(status: number, body: string): string | undefined {
  if (status === 409 && refusalError(body) === HELD_BY_LIVE_RUNTIME) return HELD_BY_LIVE_RUNTIME_HINT;
  return REFUSAL_HINTS.get(status);
}

/** The `error` of a scheduler's JSON refusal body; undefined for any other body. */
function refusalError(body: string): string | undefined {
  return refusalBody(body)?.error;
}

/**
 * For a 409 of an id held by another live runtime: how soon the replica drops the holder's tunnel should
 * it stay silent (`droppedIfSilentInMs`); undefined for any other refusal, or one that names no sane time.
 */
function heldIdFreeInMs(status: number, body: string): number | undefined {
  if (status !== 409) return undefined;
  const refusal = refusalBody(body);
  if (refusal?.error !== HELD_BY_LIVE_RUNTIME) return undefined;
  const inMs = refusal.droppedIfSilentInMs;
  return typeof inMs === 'number' && Number.isFinite(inMs) && inMs >= 0 ? inMs : undefined;
}

function refusalBody(body: string): { error?: string; droppedIfSilentInMs?: unknown } | undefined {
  try {
    const { error, droppedIfSilentInMs } = JSON.parse(body) as { error?: unknown; droppedIfSilentInMs?: unknown };
    return { ...(typeof error === 'string' ? { error } : {}), droppedIfSilentInMs };
  } catch {
    return undefined;
  }
}
/** Refusals that will not heal by themselves soon: retried at the maximum delay (401 and 403 sooner on a new token). */
const LASTING_REFUSALS = new Set([400, 401, 403]);

interface Link {
  /** Drops the connect attempt in flight, if any. */
  cancel: (() => void) | undefined;
  carrier: Carrier | undefined;
  session: http2.ServerHttp2Session | undefined;
  heartbeat: Heartbeat | undefined;
  down: boolean;
  /** The scheduler said another connection with this runtime id replaced this one (GOAWAY_REPLACED). */
  replaced: boolean;
  /** The join token this dial presents. */
  token: string;
  /** Pings answered on this tunnel. */
  pings: number;
  /** It answered GOOD_AFTER_PINGS: its loss redials at the first backoff step. */
  good: boolean;
  /** When it came up (monotonic clock), and whether its `tunnel connected` line was logged. */
  upAt: number;
  said: boolean;
  /** The scheduler's HTTP/2 SETTINGS came: the tunnel's transport got through. */
  spoke: boolean;
  /** Called once the link is down. */
  onDown?: () => void;
}

class Dialer implements TunnelDialer {
  readonly #o: DialTunnelOptions;
  readonly #clock: Clock;
  readonly #logger: TunnelLogger;
  readonly #log: FlapLog;
  /** With transport `auto`: whether dials ask for `http2` first. */
  readonly #auto: AutoTransport | undefined;
  readonly #server: http2.Http2Server<
    typeof http.IncomingMessage,
    typeof http.ServerResponse,
    typeof http2.Http2ServerRequest,
    typeof LengthDeclaringResponse
  >;
  /** Where to dial: `url`, then the fallbacks; `#at` is the one dialled now. */
  readonly #urls: readonly URL[];
  readonly #instance: string | undefined;
  #at = 0;
  #attempt = 0;
  /**
   * Dials that failed in a row since the last tunnel (not `#attempt`, which
   * also counts the tunnel's loss: the first failed redial would be its second).
   */
  #failedDials = 0;
  /** Tunnels in a row lost before they proved good: where the backoff of the next loss starts. */
  #flaps = 0;
  #link: Link | undefined;
  #retry: Timer | undefined;
  /** While refused for its token: the next look at whether it changed. */
  #recheck: Timer | undefined;
  #closed = false;
  #whenClosed: Promise<void> = Promise.resolve();
  #relays: RelayServer | undefined;
  connected = false;
  replaced = false;

  get #url(): URL {
    return this.#urls[this.#at]!;
  }

  constructor(o: DialTunnelOptions) {
    this.#o = o;
    checkDialWait(this.#liveness());
    this.#clock = o.clock ?? systemClock;
    this.#logger = o.logger ?? silentLogger;
    this.#log = new FlapLog(this.#logger, this.#clock);
    if ((o.transport ?? 'auto') === 'auto') this.#auto = new AutoTransport(this.#clock);
    this.#urls = [o.url, ...(o.fallbackUrls ?? [])].map(connectUrl);
    this.#instance = o.instance === null ? undefined : (o.instance ?? newInstanceId());
    this.#server = http2.createServer(
      {
        settings: h2Settings('runtime'),
        maxSessionMemory: H2_TUNING.maxSessionMemoryMb,
        maxHeaderListPairs: HTTP2_HEADER_FIELDS_MAX,
        streamResetBurst: H2_TUNING.streamResetBurst,
        streamResetRate: H2_TUNING.streamResetsPerSecond,
        Http2ServerResponse: LengthDeclaringResponse,
      },
      o.handler,
    );
    if (o.relayHandler) this.#relays = serveRelayConnections(this.#server, o.relayHandler);
    this.#connect();
  }

  close(graceMs: number = TUNNEL_DEFAULTS.closeGraceMs): Promise<void> {
    if (this.#closed) return this.#whenClosed;
    this.#closed = true;
    this.#retry?.cancel();
    this.#recheck?.cancel();
    this.#relays?.drain();
    const link = this.#link;
    if (!link || link.down) {
      this.#relays?.close();
      return this.#whenClosed;
    }
    this.#whenClosed = new Promise((resolve) => (link.onDown = resolve));
    // Pings go unanswered once the scheduler closes its end too; the grace bounds the wait instead.
    link.heartbeat?.stop();
    // GOAWAY tells the scheduler no new streams will be served; the socket then goes.
    if (link.session && !link.session.destroyed) link.session.close();
    this.#clock.setTimeout(() => this.#down(link, 'dialer closed'), graceMs);
    link.session?.once('close', () => this.#down(link, 'dialer closed'));
    if (!link.session) this.#down(link, 'dialer closed');
    return this.#whenClosed;
  }

  #connect(): void {
    this.#recheck?.cancel();
    this.#recheck = undefined;
    if (this.#closed) return;
    const link: Link = {
      cancel: undefined,
      carrier: undefined,
      session: undefined,
      heartbeat: undefined,
      down: false,
      replaced: false,
      token: this.#token(),
      pings: 0,
      good: false,
      upAt: 0,
      said: false,
      spoke: false,
    };
    this.#link = link;
    this.#o.onDialling?.();
    const headers = {
      authorization: `Bearer ${link.token}`,
      [RUNTIME_INFO_HEADER]: Buffer.from(JSON.stringify(this.#o.info)).toString('base64url'),
      [RUNTIME_LIVENESS_HEADER]: livenessHeaderValue(this.#liveness()),
      ...(this.#instance !== undefined ? { [RUNTIME_INSTANCE_HEADER]: this.#instance } : {}),
    };
    const url = this.#url.toString();
    // A connect attempt gets as long as a silent tunnel does.
    const { pingIntervalMs, pingTimeoutMs } = this.#liveness();
    const attempt = (t: CarrierTransport, fallback: boolean): void => {
      link.cancel = connectCarrier(
        t,
        this.#url,
        headers,
        {
          onOpen: (carrier) => this.#up(link, carrier),
          onRefused: (status, body) => {
            if (fallback && !REFUSALS_OF_ANY_TRANSPORT.has(status))
              return this.#fallBack(link, `answered ${status}`, attempt);
            const hint = refusalHint(status, body);
            const why = hint ? `scheduler refused the tunnel: ${hint}` : 'scheduler refused the tunnel';
            this.#logger.error({ status, body, url, transport: t }, why);
            // A 409 lasts until the tunnel holding the id closes: this runtime's own, not yet found dead, or
            // (a live runtime's) at the time the replica names, when the holder's pings stay overdue.
            const freeInMs = heldIdFreeInMs(status, body);
            const refused = LASTING_REFUSALS.has(status) ? 'lasting' : (freeInMs ?? status === 409);
            this.#down(link, `refused with ${status}`, refused);
            if (status === 401 || status === 403) this.#redialOnNewToken(link);
          },
          // Only a peer that was reached can have refused the upgrade; an unreachable one is retried later as is.
          onFailed: (reason, reached) =>
            fallback && reached ? this.#fallBack(link, reason, attempt) : this.#down(link, reason),
        },
        pingIntervalMs + pingTimeoutMs,
      );
    };
    const first = this.#auto?.first() ?? (this.#o.transport === 'websocket' ? 'websocket' : 'http2');
    attempt(first, first === 'http2' && this.#auto !== undefined);
  }

  /** The heartbeat's timing, announced to the scheduler when dialling. */
  #liveness(): Liveness {
    const pingIntervalMs = this.#o.pingIntervalMs ?? TUNNEL_DEFAULTS.pingIntervalMs;
    return { pingIntervalMs, pingTimeoutMs: this.#o.pingTimeoutMs ?? pingIntervalMs };
  }

  #token(): string {
    return typeof this.#o.token === 'function' ? this.#o.token() : this.#o.token;
  }

  /**
   * Refused for its token, the dialer waits the maximum delay, unless the
   * token changes first (a rotated Secret reaching this runtime after the
   * schedulers dropped the old one, an operator fixing a wrong token): then
   * it dials again at once.
   */
  #redialOnNewToken(link: Link): void {
    if (typeof this.#o.token !== 'function') return;
    const recheck = (): void => {
      if (this.#closed || this.#link !== link) return;
      if (this.#token() === link.token) {
        this.#recheck = this.#clock.setTimeout(recheck, TOKEN_RECHECK_MS);
        return;
      }
      this.#retry?.cancel();
      this.#logger.info({ runtime: this.#o.info.id }, 'join token changed; dialling again');
      this.#connect();
    };
    this.#recheck = this.#clock.setTimeout(recheck, TOKEN_RECHECK_MS);
  }

  /** `auto`: the `http2` upgrade did not go through (an older scheduler, a proxy that passes only WebSocket). */
  #fallBack(link: Link, reason: string, attempt: (t: CarrierTransport, fallback: boolean) => void): void {
    if (this.#closed || link.down) return;
    this.#logger.info({ url: this.#url.toString(), reason }, 'http2 upgrade not taken; dialing WebSocket');
    attempt('websocket', false);
  }

  #up(link: Link, carrier: Carrier): void {
    link.cancel = undefined;
    link.carrier = carrier;
    if (this.#closed || link.down) return carrier.destroy();
    carrier.onEnd((reason) => this.#down(link, reason));
    this.#server.once('session', (session: http2.ServerHttp2Session) => {
      link.session = session;
      session.on('error', (error) => this.#down(link, `session error: ${error.message}`));
      session.once('close', () => this.#down(link, 'session closed'));
      session.once('connect', () => session.setLocalWindowSize(H2_TUNING.sessionWindowBytes));
      session.once('remoteSettings', () => (link.spoke = true));
      session.on('goaway', (_code: number, _last: number, data?: Buffer) => {
        if (data?.toString('latin1') === GOAWAY_REPLACED) link.replaced = true;
      });
    });
    this.#server.emit('connection', carrier.stream);
    const { pingIntervalMs, pingTimeoutMs } = this.#liveness();
    link.heartbeat = new Heartbeat({
      clock: this.#clock,
      intervalMs: pingIntervalMs,
      timeoutMs: pingTimeoutMs,
      probe: () => (link.session ? carrier.probe(link.session) : Promise.reject(new Error('no session'))),
      onRtt: () => this.#answered(link),
      onDead: (reason) => this.#down(link, reason),
    });
    // The backoff goes on from the tunnels lost before, not from the failed dials: a tunnel dropped at once
    // must not be redialled at once (see #answered), but a scheduler that was down a while is no flapping.
    this.#attempt = this.#flaps;
    this.#failedDials = 0;
    this.connected = true;
    this.replaced = false;
    link.upAt = this.#clock.monotonicNow();
    link.said = this.#log.connected(this.#upFields(carrier));
    this.#o.onConnected?.();
  }

  /** A ping came back: a tunnel that has answered enough of them is good, and its loss redials at once. */
  #answered(link: Link): void {
    if (link.good || ++link.pings < GOOD_AFTER_PINGS) return;
    link.good = true;
    if (this.#link !== link || !link.carrier) return;
    this.#attempt = 0;
    this.#flaps = 0;
    this.#log.good({ ...this.#upFields(link.carrier), upMs: this.#clock.monotonicNow() - link.upAt }, link.said);
  }

  /** `auto`: an http2 tunnel on which the scheduler never spoke HTTP/2 counts against the transport. */
  #judgeHttp2(link: Link): void {
    if (!this.#auto?.ended(link.spoke)) return;
    this.#logger.warn(
      { url: this.#url.toString(), runtime: this.#o.info.id, retryHttp2InMs: HTTP2_RETRY_MS },
      'http2 tunnels dropped before the scheduler spoke HTTP/2; dialing WebSocket',
    );
  }

  /** How long after a failed dial or a lost tunnel (see `#down`'s `refused`) the next dial comes. */
  #redialDelayMs(refused: boolean | 'lasting' | number): number {
    const random = this.#o.random ?? Math.random;
    const backoff = this.#o.backoff ?? {};
    if (refused === 'lasting') {
      return backoffDelayMs(0, { ...backoff, initialMs: backoff.maxMs ?? BACKOFF_DEFAULTS.maxMs }, random);
    }
    const attempt = this.#attempt++;
    if (typeof refused === 'number') return delayAfterMs(refused + HELD_ID_REDIAL_MARGIN_MS, backoff, random);
    return backoffDelayMs(attempt, backoff, random);
  }

  #upFields(carrier: Carrier): object {
    return { url: this.#url.toString(), runtime: this.#o.info.id, transport: carrier.transport };
  }

  /**
   * Tears one link down (once) and schedules the next dial unless closed. `refused`: by the scheduler,
   * `lasting` (dialled again at the maximum delay), passing (`true`: at the next backoff step) or passing
   * in so many ms (dialled again a little after that, within the maximum delay).
   */
  #down(link: Link, reason: string, refused: boolean | 'lasting' | number = false): void {
    if (link.down) return;
    link.down = true;
    link.onDown?.();
    link.heartbeat?.stop();
    if (link.session && !link.session.destroyed) link.session.destroy();
    link.cancel?.();
    link.carrier?.destroy();
    // Closed for good, its relays went with the tunnel: nothing is left for the relay server to check.
    if (this.#closed) this.#relays?.close();
    const wasConnected = this.connected && this.#link === link;
    if (this.#link === link) this.connected = false;
    if (wasConnected && !link.good) this.#flaps++;
    if (wasConnected && link.carrier?.transport === 'http2' && !this.#closed) this.#judgeHttp2(link);
    if (wasConnected) {
      const fields = { runtime: this.#o.info.id, reason, upMs: this.#clock.monotonicNow() - link.upAt };
      this.#log.disconnected(fields, { good: link.good, said: link.said, closed: this.#closed });
      this.#o.onDisconnected?.(reason);
    }
    if (this.#closed || this.#link !== link) return;
    if (link.replaced) {
      // Dialling again at once would take the id back from the other runtime, which would do the same:
      // both come and go. Not dialling ever would leave the id unserved should the other one stop.
      this.replaced = true;
      this.#logger.error(
        { runtime: this.#o.info.id, retryInMs: REPLACED_REDIAL_MS },
        'another runtime connected with this runtime id and replaced this tunnel: dialling again in 5 min; give each runtime its own id',
      );
      this.#retry = this.#clock.setTimeout(() => this.#connect(), REPLACED_REDIAL_MS);
      return;
    }
    const dialled = this.#url.toString();
    // A dial that failed goes to the next replica; a tunnel that was up is redialled where it was.
    if (!wasConnected) this.#at = (this.#at + 1) % this.#urls.length;
    const delayMs = this.#redialDelayMs(refused);
    // A scheduler that cannot be reached (a wrong URL, a firewall, an outage) is said so at the first
    // failed dial and every tenth after: a runtime that never joins must not be silent about it.
    if (refused === false && !wasConnected && this.#failedDials++ % UNREACHABLE_LOGGED_EVERY === 0) {
      this.#logger.warn(
        { url: dialled, runtime: this.#o.info.id, reason, attempt: this.#failedDials, retryInMs: delayMs },
        'scheduler unreachable; dialling again',
      );
    }
    this.#retry = this.#clock.setTimeout(() => this.#connect(), delayMs);
    // Told after the lines above, so a listener has them when it hears the dial ended.
    if (!wasConnected) this.#o.onDialFailed?.(reason);
  }
}

/** The connect URL of a scheduler base URL: `http(s)` (for `ws(s)` too), with CONNECT_PATH appended. */
function connectUrl(base: string): URL {
  const url = new URL(base);
  url.protocol = url.protocol === 'https:' || url.protocol === 'wss:' ? 'https:' : 'http:';
  url.pathname = url.pathname.replace(/\/$/, '') + CONNECT_PATH;
  return url;
}

/**
 * A dial waits the ping interval and the ping timeout for the scheduler in one timer, which Node.js runs after
 * 1 ms when set past TIMER_DELAY_MS_MAX: every dial would fail at once and the runtime never join, while each
 * value alone looks valid.
 */
function checkDialWait({ pingIntervalMs, pingTimeoutMs }: Liveness): void {
  if (pingIntervalMs + pingTimeoutMs <= TIMER_DELAY_MS_MAX) return;
  throw new SwitchyardError(
    'invalid_request',
    `pingIntervalMs + pingTimeoutMs (${pingIntervalMs} + ${pingTimeoutMs}) must be at most ${TIMER_DELAY_MS_MAX} (24.8 days): a dial waits both in one timer, which Node.js runs after 1 ms past that, so every dial would fail`,
  );
}
