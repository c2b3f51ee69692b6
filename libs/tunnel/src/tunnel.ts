import http2 from 'node:http2';
import { Heartbeat, type Clock, type Timer } from '@switchyard/clock';
import { HTTP2_HEADER_FIELDS_MAX, SwitchyardError } from '@switchyard/protocol';
import type { RuntimeInfo } from '@switchyard/protocol';
import { H2_TUNING, RELAY_AUTHORITY, TUNNEL_DEFAULTS, h2Settings } from './defaults.ts';
import { createH2Fetch } from './fetch.ts';
import { noticeDeadline, type Liveness } from './liveness.ts';
import type { Carrier, CarrierTransport } from './carrier.ts';

/**
 * One runtime's live tunnel, as the scheduler holds it. The scheduler is the
 * HTTP/2 client: every request into the runtime is a stream on `session`.
 *
 * Guarantees: once `closed` is true it stays true, `whenClosed` has resolved
 * with the reason, and `request`/`fetch` fail at once with
 * `SwitchyardError('upstream_unavailable')`. While the tunnel carries as
 * many streams as the runtime takes at once (`request` and `openConnection`
 * leave `H2_TUNING.controlStreams` of them to `fetch`), they fail at once with
 * `SwitchyardError('capacity_exhausted')`: Node's HTTP/2 would hold a new
 * stream until another ends, which an event stream may never do. When the
 * peer dies (liveness timeout, transport error) every open stream errors at
 * the same moment.
 * Not guaranteed: that a request which was sent reached the runtime.
 */
export interface Tunnel {
  readonly runtimeId: string;
  readonly info: RuntimeInfo;
  /** Increases with every accepted connection in this process, and across restarts (it starts from the wall clock). */
  readonly generation: number;
  /**
   * The fingerprint of the join token the tunnel came with (see `joinTokenFingerprint`), which the
   * replica publishes so that others refuse the id to another token; undefined when opened without one.
   */
  readonly tokenFingerprint: string | undefined;
  /**
   * The instance id its runtime process dialled with (`RUNTIME_INSTANCE_HEADER`), by which this replica
   * refuses the id to another live runtime, and which it publishes so that others refuse it too (see
   * `instanceElsewhere`); undefined for a runtime that sent none.
   */
  readonly instance: string | undefined;
  /** Wall-clock time (ms since the epoch) the tunnel was accepted: a timestamp for people, not for durations. */
  readonly connectedAt: number;
  /** How its HTTP/2 travels: straight on the upgraded connection or in WebSocket messages. */
  readonly transport: CarrierTransport;
  /** Last HTTP/2 ping round trip; undefined until the first ping is answered. */
  readonly rttMs: number | undefined;
  /**
   * The least ping round trip so far: what the link itself takes, without
   * the queueing or the pause of either process that any one ping may have
   * met. Undefined until the first ping is answered.
   */
  readonly minRttMs: number | undefined;
  readonly session: http2.ClientHttp2Session;
  readonly closed: boolean;
  /** Streams open on the tunnel now, counted against the runtime's `MAX_CONCURRENT_STREAMS`. */
  readonly streams: number;
  /**
   * False once `closed` or once the session is closing or destroyed: a
   * socket that closes under the session destroys it, and fails its
   * streams, before the tunnel hears of it.
   */
  readonly usable: boolean;
  /**
   * True once it ended without a GOAWAY from either side: the connection
   * broke or went silent, and its runtime, if it lives, redials at once.
   */
  readonly lost: boolean;
  /**
   * Set once the tunnel was lost to silence (a ping unanswered) if its
   * runtime announced its liveness timing: the `Clock.monotonicNow()`
   * reading by which the runtime, if it lives, has found the connection dead
   * as well, and dials again. Until then the runtime may not know (see
   * `liveness.ts`).
   */
  readonly peerNoticesBy: number | undefined;
  /**
   * True when the runtime announced its liveness timing and its pings have
   * stopped coming: none for longer than its interval and timeout. A runtime
   * that lives pings within its interval; one that stopped has found the
   * connection dead, or is frozen, while this end may not know yet.
   */
  readonly peerQuiet: boolean;
  /**
   * How long (whole ms, rounded up), should no ping of the runtime come
   * meanwhile, until `peerQuiet` turns true (0 once it has): undefined when the runtime announced no
   * liveness timing. A ping that comes puts it back to the full interval and
   * timeout.
   */
  readonly peerQuietInMs: number | undefined;
  /**
   * True while the scheduler holds back this tunnel's log lines: its runtime's
   * tunnels keep closing soon after they open (see `TunnelLog`). Lines about
   * it elsewhere may then go to debug; false once it has stayed up, its
   * pings answered.
   */
  readonly quiet: boolean;
  /** Resolves with the close reason; never rejects. */
  readonly whenClosed: Promise<string>;
  /** Opens a stream into the runtime; `:scheme`/`:authority` default to http/runtime. */
  request(headers: http2.OutgoingHttpHeaders, options?: http2.ClientSessionRequestOptions): http2.ClientHttp2Stream;
  /**
   * Opens a CONNECT stream: a byte stream to the runtime's HTTP/1.1 server,
   * on which a gateway's connection is relayed (see `relay-connection.ts`).
   */
  openConnection(): http2.ClientHttp2Stream;
  /**
   * Minimal WHATWG fetch over this tunnel (see `createH2Fetch`); usable as the
   * `eventsource` package's `fetch`. For the scheduler's own requests (its
   * `/watch`), which may use the streams traffic leaves free. A response body
   * must be read or cancelled: until then its stream is open, and counted.
   */
  readonly fetch: typeof fetch;
  /**
   * GOAWAY, then destroy after a short grace. Idempotent. `peerNote` rides
   * the GOAWAY as its debug data, for the runtime to read.
   */
  close(reason?: string, peerNote?: string): void;
}

export interface ClientTunnelOptions {
  readonly carrier: Carrier;
  readonly info: RuntimeInfo;
  readonly generation: number;
  /** See `Tunnel.tokenFingerprint`. */
  readonly tokenFingerprint?: string;
  /** See `Tunnel.instance`. */
  readonly instance?: string;
  readonly clock: Clock;
  readonly pingIntervalMs: number;
  readonly pingTimeoutMs: number;
  /** The runtime's own ping timing, when it announced it. */
  readonly peerLiveness?: Liveness;
  /** Whether its lines are held back now (see `Tunnel.quiet`). Default: never. */
  readonly quiet?: () => boolean;
  /** Called each time the runtime answers one of this end's pings. */
  readonly onPingAnswered?: () => void;
}

/** Builds the scheduler side of an accepted connection. */
export function openClientTunnel(options: ClientTunnelOptions): Tunnel {
  return new ClientTunnel(options);
}

class ClientTunnel implements Tunnel {
  readonly runtimeId: string;
  readonly info: RuntimeInfo;
  readonly generation: number;
  readonly tokenFingerprint: string | undefined;
  readonly instance: string | undefined;
  readonly connectedAt: number;
  readonly transport: CarrierTransport;
  readonly session: http2.ClientHttp2Session;
  readonly whenClosed: Promise<string>;
  readonly fetch: typeof fetch;
  rttMs: number | undefined;
  minRttMs: number | undefined;
  closed = false;
  lost = false;
  peerNoticesBy: number | undefined;
  readonly #carrier: Carrier;
  readonly #peerLiveness: Liveness | undefined;
  /** When the runtime's last ping arrived (or the tunnel was accepted, before its first); monotonic. */
  #lastPeerPingAt: number;
  readonly #clock: Clock;
  readonly #heartbeat: Heartbeat;
  readonly #quiet: (() => boolean) | undefined;
  #resolveClosed!: (reason: string) => void;
  #graceTimer: Timer | undefined;
  /** Streams open on the session (opened and not yet closed). */
  #streams = 0;

  constructor(o: ClientTunnelOptions) {
    this.runtimeId = o.info.id;
    this.info = o.info;
    this.generation = o.generation;
    this.tokenFingerprint = o.tokenFingerprint;
    this.instance = o.instance;
    this.connectedAt = o.clock.now();
    this.#lastPeerPingAt = o.clock.monotonicNow();
    this.#peerLiveness = o.peerLiveness;
    this.#carrier = o.carrier;
    this.transport = o.carrier.transport;
    this.#clock = o.clock;
    this.#quiet = o.quiet;
    this.whenClosed = new Promise((resolve) => (this.#resolveClosed = resolve));
    this.session = http2.connect('http://runtime', {
      createConnection: () => o.carrier.stream,
      settings: h2Settings('scheduler'),
      maxSessionMemory: H2_TUNING.maxSessionMemoryMb,
      maxHeaderListPairs: HTTP2_HEADER_FIELDS_MAX,
      peerMaxConcurrentStreams: H2_TUNING.maxConcurrentStreams,
    });
    this.session.once('connect', () => this.session.setLocalWindowSize(H2_TUNING.sessionWindowBytes));
    this.session.on('error', (error) => this.#die(`session error: ${error.message}`));
    // The runtime is stopping: no new streams, but those in flight may finish.
    this.session.once('goaway', () =>
      this.#close('runtime sent GOAWAY', undefined, TUNNEL_DEFAULTS.runtimeGoawayGraceMs),
    );
    this.session.once('close', () => this.#die('session closed'));
    this.session.on('ping', () => (this.#lastPeerPingAt = o.clock.monotonicNow()));
    o.carrier.onEnd((reason) => this.#die(reason));
    this.#heartbeat = new Heartbeat({
      clock: o.clock,
      intervalMs: o.pingIntervalMs,
      timeoutMs: o.pingTimeoutMs,
      probe: () => o.carrier.probe(this.session),
      onRtt: (rttMs) => {
        this.rttMs = rttMs;
        this.minRttMs = Math.min(rttMs, this.minRttMs ?? Infinity);
        o.onPingAnswered?.();
      },
      onDead: (reason, cause) => {
        if (cause === 'unanswered' && this.#peerLiveness) {
          this.peerNoticesBy = noticeDeadline(this.#lastPeerPingAt, this.#peerLiveness);
        }
        this.#die(reason);
      },
    });
    this.fetch = createH2Fetch((headers) => this.#open({ ':scheme': 'http', ':authority': 'runtime', ...headers }, 0));
  }

  get quiet(): boolean {
    return this.#quiet?.() ?? false;
  }

  get peerQuiet(): boolean {
    const liveness = this.#peerLiveness;
    if (!liveness) return false;
    return this.#clock.monotonicNow() - this.#lastPeerPingAt > liveness.pingIntervalMs + liveness.pingTimeoutMs;
  }

  get peerQuietInMs(): number | undefined {
    const liveness = this.#peerLiveness;
    if (!liveness) return undefined;
    const quietAt = this.#lastPeerPingAt + liveness.pingIntervalMs + liveness.pingTimeoutMs;
    return Math.max(0, Math.ceil(quietAt - this.#clock.monotonicNow()));
  }

  get streams(): number {
    return this.#streams;
  }

  get usable(): boolean {
    return !this.closed && !this.session.closed && !this.session.destroyed;
  }

  request(headers: http2.OutgoingHttpHeaders, options?: http2.ClientSessionRequestOptions): http2.ClientHttp2Stream {
    return this.#open({ ':scheme': 'http', ':authority': 'runtime', ...headers }, H2_TUNING.controlStreams, options);
  }

  openConnection(): http2.ClientHttp2Stream {
    // A CONNECT stream carries no :scheme or :path (RFC 9113 §8.5).
    return this.#open({ ':method': 'CONNECT', ':authority': RELAY_AUTHORITY }, H2_TUNING.controlStreams);
  }

  /** Opens a stream unless fewer than `reserved` streams of the runtime's limit would be left free. */
  #open(
    headers: http2.OutgoingHttpHeaders,
    reserved: number,
    options?: http2.ClientSessionRequestOptions,
  ): http2.ClientHttp2Stream {
    if (!this.usable) {
      throw new SwitchyardError('upstream_unavailable', `tunnel to runtime ${this.runtimeId} is closed`);
    }
    // What the runtime's SETTINGS say, and never more than H2_TUNING's limit (HTTP/2 assumes no limit before
    // the SETTINGS; the reference runtime advertises a few streams more, see runtimeStreamsSlack).
    const limit = Math.min(
      this.session.remoteSettings.maxConcurrentStreams ?? Infinity,
      H2_TUNING.maxConcurrentStreams,
    );
    if (this.#streams >= limit - reserved) {
      throw new SwitchyardError(
        'capacity_exhausted',
        `tunnel to runtime ${this.runtimeId} carries ${this.#streams} streams, as many as the runtime takes at once`,
      );
    }
    let stream: http2.ClientHttp2Stream;
    try {
      stream = this.session.request(headers, options);
    } catch (error) {
      throw new SwitchyardError('upstream_unavailable', `tunnel to runtime ${this.runtimeId} refused a stream`, {
        cause: error,
      });
    }
    this.#streams++;
    stream.once('close', () => this.#streams--);
    return stream;
  }

  close(reason = 'closed', peerNote?: string): void {
    this.#close(reason, peerNote, TUNNEL_DEFAULTS.closeGraceMs);
  }

  #close(reason: string, peerNote: string | undefined, graceMs: number): void {
    if (this.closed) return;
    this.#markClosed(reason);
    if (peerNote !== undefined && !this.session.destroyed) {
      this.session.goaway(http2.constants.NGHTTP2_NO_ERROR, 0, Buffer.from(peerNote));
    }
    // GOAWAY lets streams in flight finish; the grace timer bounds how long.
    this.session.close(() => this.#teardown());
    this.#graceTimer = this.#clock.setTimeout(() => this.#teardown(), graceMs);
  }

  /** The peer is gone or broken: fail every stream now, no grace. */
  #die(reason: string): void {
    if (!this.closed) {
      this.lost = true;
      this.#markClosed(reason);
    }
    this.#teardown(reason);
  }

  #markClosed(reason: string): void {
    this.closed = true;
    this.#heartbeat.stop();
    this.#resolveClosed(reason);
  }

  #teardown(reason = 'tunnel closed'): void {
    this.#graceTimer?.cancel();
    if (!this.session.destroyed) {
      this.session.destroy(new SwitchyardError('upstream_unavailable', `runtime ${this.runtimeId}: ${reason}`));
    }
    this.#carrier.destroy();
  }
}
