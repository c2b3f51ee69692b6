import { timingSafeEqual } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import { WebSocketServer } from 'ws';
import { systemClock } from '@switchyard/clock';
import type { Clock } from '@switchyard/clock';
import { RUNTIME_INSTANCE_HEADER, RUNTIME_LIVENESS_HEADER, SwitchyardError } from '@switchyard/protocol';
import { watchTokenRevocations, type TokenRevocations } from '@switchyard/service';
import { admit, joinTokenScope, writeRefusal, type Refusal } from './admission.ts';
import { TUNNEL_UPGRADE, socketCarrier, webSocketCarrier } from './carrier.ts';
import type { Carrier } from './carrier.ts';
import { GOAWAY_REPLACED, TUNNEL_DEFAULTS, silentLogger } from './defaults.ts';
import type { TunnelLogger } from './defaults.ts';
import { heldByAnotherLiveRuntime, parseInstance } from './instance.ts';
import { parseLiveness, type Liveness } from './liveness.ts';
import { RefusalLog } from './refusal-log.ts';
import { SHARED_ID_WINDOW_MS, SharedIds } from './shared-ids.ts';
import { TunnelLog } from './tunnel-log.ts';
import { fingerprintOfDigest, sameFingerprint } from './token-fingerprint.ts';
import { openClientTunnel } from './tunnel.ts';
import type { Tunnel } from './tunnel.ts';

export interface TunnelEndpointOptions {
  /**
   * Join tokens currently accepted, one per entry as `<token>` (admits any
   * runtime id) or `<token> <id pattern>` (admits the ids the glob matches,
   * `*` standing for any run of characters; see `parseJoinTokens`); read on
   * every connect so rotation needs no restart. A tunnel whose token is
   * removed from the list, or whose token's pattern no longer admits its id,
   * is closed (within about a second; see TokenRevocations).
   */
  readonly tokens: () => readonly string[];
  /** Most runtimes connected at once; one more is answered 503. A reconnect of a connected id does not count. */
  readonly maxRuntimes: number;
  /** Liveness probe period. Default 5000 ms. */
  readonly pingIntervalMs?: number;
  /** How long a probe may go unanswered before the tunnel is declared dead. Default = pingIntervalMs. */
  readonly pingTimeoutMs?: number;
  /** Largest total size of the connect request's headers; past it 431. Default 16 KiB. */
  readonly headerBytesMax?: number;
  readonly logger?: TunnelLogger;
  readonly clock?: Clock;
  /**
   * The fingerprint of the join token (see `joinTokenFingerprint`) with which a live tunnel of
   * `runtimeId` is held at another scheduler replica, as this replica's latest view of the cluster
   * shows; undefined for none, or for one reported without a fingerprint (by a replica of an earlier
   * release: not checked). A connect for the id presenting another token is refused 409, as for a
   * tunnel held here. Called once or twice per connect: a map lookup, no I/O. Default: none known.
   */
  readonly claimedElsewhere?: (runtimeId: string) => string | undefined;
  /**
   * The instance id (`X-Runtime-Instance`) of the runtime process whose live tunnel of `runtimeId` is held
   * at another scheduler replica, as this replica's latest view of the cluster shows; undefined for none, or
   * for one reported without an instance (a runtime or replica of an earlier release: not checked). A
   * connect for the id naming another instance is refused 409, as for a live tunnel held here; one naming
   * the same instance (the runtime redialling) or none is not. Called once or twice per connect: a map
   * lookup, no I/O. Default: none known.
   */
  readonly instanceElsewhere?: (runtimeId: string) => string | undefined;
  /** Called when a tunnel is accepted (after a replaced one was told to close). */
  readonly onTunnel?: (tunnel: Tunnel) => void;
  /** Called once per tunnel when it closes, with the reason. */
  readonly onTunnelClosed?: (tunnel: Tunnel, reason: string) => void;
}

/**
 * The scheduler's side of `/api/runtime/connect`: authenticates runtimes,
 * upgrades them (to `switchyard-tunnel` or WebSocket, as each asks) and holds
 * one HTTP/2 tunnel per runtime id.
 * Events are the `onTunnel`/`onTunnelClosed` option callbacks.
 */
export interface TunnelEndpoint {
  /** Call from an `http.Server` `'upgrade'` listener for `/api/runtime/connect`. Never throws. */
  handleUpgrade(req: IncomingMessage, socket: Duplex, head: Buffer): void;
  /** The open tunnel of a runtime, if any. */
  get(runtimeId: string): Tunnel | undefined;
  list(): Tunnel[];
  /** GOAWAY to every tunnel, then destroy; refuses new connections. Idempotent. */
  close(): void;
}

/**
 * Creates the endpoint. Guarantees: at most `maxRuntimes` tunnels, at most one
 * per runtime id (a newer connection replaces and closes the older, if it
 * presents the join token the older one came with), join tokens are compared
 * in constant time and never logged. Refusals are plain HTTP responses with a
 * JSON body: 401 bad token, 400 bad `X-Runtime-Info` (naming the field, or an
 * `Upgrade` other than the two transports), 403 an id the token's pattern does
 * not admit, 409 an id whose tunnel here came with another token (until that
 * tunnel closes: a runtime's own token rotated meets it only while its old
 * tunnel is not yet found dead), 409 too an id whose tunnel here belongs to
 * another runtime process (`X-Runtime-Instance`) that still pings on it (a
 * runtime restarted over a connection gone silent joins once its old pings
 * are overdue, see `Tunnel.peerQuiet`), 431 headers too large, 503 full or closing.
 * The 409 also covers an id that `claimedElsewhere` shows held at another
 * replica with another token, and one that `instanceElsewhere` shows held
 * there by another runtime process. Not guaranteed: two connects for one id
 * with different tokens or instances at two replicas, before any view shows
 * either, are both taken (the newer connection wins the epoch).
 */
export function createTunnelEndpoint(options: TunnelEndpointOptions): TunnelEndpoint {
  if (!Number.isInteger(options.maxRuntimes) || options.maxRuntimes < 1) {
    throw new SwitchyardError('invalid_request', 'maxRuntimes must be a positive integer');
  }
  return new Endpoint(options);
}

/** An admitted runtime, between its handshake and its tunnel. */
interface Peer {
  readonly info: Tunnel['info'];
  /** SHA-256 of its join token. */
  readonly tokenDigest: Buffer;
  /** What the replica publishes of that token (see `fingerprintOfDigest`). */
  readonly tokenFingerprint: string;
  /** Its liveness timing, when it announced one (`X-Runtime-Liveness`). */
  readonly liveness: Liveness | undefined;
  /** Its process's instance id, when it named one (`X-Runtime-Instance`). */
  readonly instance: string | undefined;
}

class Endpoint implements TunnelEndpoint {
  readonly #o: TunnelEndpointOptions;
  readonly #clock: Clock;
  readonly #logger: TunnelLogger;
  readonly #refusals: RefusalLog;
  readonly #lines: TunnelLog;
  readonly #pingIntervalMs: number;
  readonly #pingTimeoutMs: number;
  readonly #tunnels = new Map<string, Tunnel>();
  /** The digest of the join token each tunnel came with. */
  readonly #tokenDigests = new WeakMap<Tunnel, Buffer>();
  readonly #revocations: TokenRevocations;
  readonly #sharedIds: SharedIds;
  readonly #wss: WebSocketServer;
  #generation: number;
  #closed = false;

  constructor(o: TunnelEndpointOptions) {
    this.#o = o;
    this.#clock = o.clock ?? systemClock;
    this.#logger = o.logger ?? silentLogger;
    this.#refusals = new RefusalLog(this.#logger, this.#clock);
    this.#pingIntervalMs = o.pingIntervalMs ?? TUNNEL_DEFAULTS.pingIntervalMs;
    this.#pingTimeoutMs = o.pingTimeoutMs ?? this.#pingIntervalMs;
    const runtimesMax = Math.max(o.maxRuntimes * 4, 1024);
    this.#lines = new TunnelLog(this.#logger, this.#clock, runtimesMax);
    // Microseconds of wall time: a restarted scheduler still hands out higher generations.
    this.#generation = this.#clock.now() * 1000;
    this.#revocations = watchTokenRevocations({ tokens: o.tokens, clock: this.#clock });
    this.#sharedIds = new SharedIds(runtimesMax);
    this.#wss = new WebSocketServer({
      noServer: true,
      perMessageDeflate: false,
      maxPayload: TUNNEL_DEFAULTS.wsPayloadBytesMax,
    });
  }

  handleUpgrade(req: IncomingMessage, socket: Duplex, head: Buffer): void {
    socket.on('error', () => {});
    const remote = req.socket.remoteAddress;
    if (this.#closed) return writeRefusal(socket, { status: 503, body: { error: 'endpoint closing' } });
    const admission = admit(req, this.#o.tokens(), this.#o.headerBytesMax ?? TUNNEL_DEFAULTS.headerBytesMax);
    if (!admission.ok) {
      const { status, body } = admission.refusal;
      const named = body.runtime === undefined ? {} : { runtime: body.runtime };
      const fields = { remote, status, error: body.error, field: body.field, ...named };
      this.#refusals.warn('runtime connect refused', fields);
      return writeRefusal(socket, admission.refusal);
    }
    const { info, tokenDigest } = admission;
    const tokenFingerprint = fingerprintOfDigest(tokenDigest);
    const holder = this.#heldByOtherToken(info.id, tokenDigest, tokenFingerprint);
    /**
     * Refuses the connect of `info.id` with `status` and `error` (and a 409's `more` of its body), said
     * (throttled) as `why`, with `fields`.
     */
    const refuse = (why: string, status: Refusal['status'], error: string, fields: object = {}, more = {}): void => {
      this.#refusals.warn(`runtime connect refused: ${why}`, { remote, runtime: info.id, ...fields, status, error });
      writeRefusal(socket, { status, body: status === 409 ? { error, runtime: info.id, ...more } : { error } });
    };
    if (holder) {
      const where = holder === 'elsewhere' ? { elsewhere: true } : {};
      return refuse('id held by another join token', 409, 'runtime id connected with another join token', where);
    }
    const instance = parseInstance(req.headers[RUNTIME_INSTANCE_HEADER]);
    const live = this.#heldByAnotherLiveRuntime(info.id, instance);
    if (live) {
      const where = live === 'elsewhere' ? { elsewhere: true } : {};
      // A runtime restarted over a dead connection held here need only wait: says for how long at most.
      const droppedIfSilentInMs = live === 'here' ? this.#tunnels.get(info.id)?.peerQuietInMs : undefined;
      const when = droppedIfSilentInMs === undefined ? {} : { droppedIfSilentInMs };
      return refuse('id held by another live runtime', 409, 'runtime id held by another live runtime', where, when);
    }
    const others = this.#tunnels.size - (this.#tunnels.has(info.id) ? 1 : 0);
    if (others >= this.#o.maxRuntimes) {
      return refuse('full', 503, 'runtime capacity reached', { maxRuntimes: this.#o.maxRuntimes });
    }
    const upgrade = req.headers.upgrade?.toLowerCase();
    const liveness = parseLiveness(req.headers[RUNTIME_LIVENESS_HEADER]);
    const peer: Peer = { info, tokenDigest, tokenFingerprint, liveness, instance };
    if (upgrade === TUNNEL_UPGRADE) return this.#acceptUpgrade(socket, head, peer);
    if (upgrade === 'websocket') {
      return this.#wss.handleUpgrade(req, socket, head, (ws) => this.#accept(webSocketCarrier(ws), peer));
    }
    this.#refusals.warn('runtime connect refused: unsupported Upgrade', {
      remote,
      runtime: info.id,
      status: 400,
      error: 'unsupported Upgrade',
      upgrade,
    });
    writeRefusal(socket, {
      status: 400,
      body: { error: 'unsupported Upgrade', field: 'Upgrade', detail: `expected ${TUNNEL_UPGRADE} or websocket` },
    });
  }

  get(runtimeId: string): Tunnel | undefined {
    return this.#tunnels.get(runtimeId);
  }

  list(): Tunnel[] {
    return [...this.#tunnels.values()];
  }

  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#revocations.close();
    for (const tunnel of this.#tunnels.values()) tunnel.close('endpoint closed');
    this.#wss.close();
  }

  /**
   * The `http2` transport: answer 101, then HTTP/2 runs on the socket itself,
   * once the 101 is written. HTTP/2 must not take over a socket with a write
   * of ours in flight: on a TLS socket Node can then abort the process
   * (`Assertion failed: is_write_in_progress()`). Paused meanwhile, the
   * socket keeps what the runtime sends after the 101 for HTTP/2 to read.
   */
  #acceptUpgrade(socket: Duplex, head: Buffer, peer: Peer): void {
    // The runtime speaks only after our 101, so `head` is empty unless it broke protocol; HTTP/2 will judge.
    if (head.length > 0) socket.unshift(head);
    if (socket instanceof Socket) socket.setNoDelay(true);
    socket.pause();
    socket.write(
      `HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: ${TUNNEL_UPGRADE}\r\n\r\n`,
      (error) => {
        if (error || socket.destroyed) return void socket.destroy();
        this.#accept(socketCarrier(socket), peer);
      },
    );
  }

  /**
   * Where a live tunnel of `runtimeId` is held with a token other than the one of `tokenDigest`: here,
   * or at another replica (as `claimedElsewhere` tells); undefined when nowhere known. A tunnel open
   * here decides alone: its own token takes it over, whatever an older epoch shows elsewhere.
   */
  #heldByOtherToken(runtimeId: string, tokenDigest: Buffer, fingerprint: string): 'here' | 'elsewhere' | undefined {
    const live = this.#tunnels.get(runtimeId);
    const liveDigest = live && !live.closed ? this.#tokenDigests.get(live) : undefined;
    if (liveDigest !== undefined) return timingSafeEqual(liveDigest, tokenDigest) ? undefined : 'here';
    const claimed = this.#o.claimedElsewhere?.(runtimeId);
    return claimed !== undefined && !sameFingerprint(claimed, fingerprint) ? 'elsewhere' : undefined;
  }

  /**
   * Where a live tunnel of `runtimeId` belongs to another runtime process than `instance`: here, when the
   * tunnel open here is another's that still pings on it (see `heldByAnotherLiveRuntime`), or at another
   * replica (as `instanceElsewhere` tells); undefined when nowhere known. A second runtime with the id must
   * not take the place, and the sessions, of one that runs. Its own redial, or a successor once its pings
   * stopped here or its entry is no longer live in the view, takes the id over. Unlike a token, a tunnel
   * open here does not decide alone: a view showing another instance live elsewhere shows the runtime
   * that the epoch (the higher generation) sends the id's traffic to.
   */
  #heldByAnotherLiveRuntime(runtimeId: string, instance: string | undefined): 'here' | 'elsewhere' | undefined {
    const live = this.#tunnels.get(runtimeId);
    if (live !== undefined && heldByAnotherLiveRuntime(live, instance)) return 'here';
    if (instance === undefined) return undefined;
    const elsewhere = this.#o.instanceElsewhere?.(runtimeId);
    return elsewhere !== undefined && elsewhere !== instance ? 'elsewhere' : undefined;
  }

  #accept(carrier: Carrier, { info, tokenDigest, tokenFingerprint, liveness, instance }: Peer): void {
    // Checked again: another connect for the id may have been accepted during this one's upgrade.
    if (
      this.#closed ||
      this.#heldByOtherToken(info.id, tokenDigest, tokenFingerprint) ||
      this.#heldByAnotherLiveRuntime(info.id, instance)
    ) {
      return carrier.destroy();
    }
    // Wall clock: generations are compared across replicas and restarts, which no monotonic reading spans.
    this.#generation = Math.max(this.#generation + 1, this.#clock.now() * 1000);
    const life = this.#lines.opened(info.id, { generation: this.#generation, transport: carrier.transport });
    const tunnel = openClientTunnel({
      quiet: () => life.quiet,
      onPingAnswered: () => life.answered(),
      carrier,
      info,
      generation: this.#generation,
      tokenFingerprint,
      ...(instance !== undefined ? { instance } : {}),
      clock: this.#clock,
      pingIntervalMs: this.#pingIntervalMs,
      pingTimeoutMs: this.#pingTimeoutMs,
      ...(liveness ? { peerLiveness: liveness } : {}),
    });
    const previous = this.#tunnels.get(info.id);
    this.#tunnels.set(info.id, tunnel);
    this.#tokenDigests.set(tunnel, tokenDigest);
    previous?.close('replaced by a newer connection', GOAWAY_REPLACED);
    // The same runtime taking its own tunnel over (a redial after a break) is no sign of a shared id.
    const sameRuntime = instance !== undefined && previous?.instance === instance;
    if (previous && !sameRuntime && this.#sharedIds.replaced(info.id, this.#clock.monotonicNow())) {
      this.#logger.warn(
        { runtime: info.id, withinMs: SHARED_ID_WINDOW_MS },
        'runtime id used by more than one runtime (its tunnel keeps being replaced): give each runtime its own id',
      );
    }
    const release = this.#revocations.hold(
      () => joinTokenScope(tokenDigest, this.#o.tokens())?.(info.id) === true,
      () => {
        if (joinTokenScope(tokenDigest, this.#o.tokens())) {
          this.#logger.warn({ runtime: info.id }, 'tunnel closed: its join token no longer admits its runtime id');
          return tunnel.close('join token no longer admits this runtime id');
        }
        this.#logger.warn({ runtime: info.id }, 'tunnel closed: its join token was removed');
        tunnel.close('join token removed');
      },
    );
    void tunnel.whenClosed.then((reason) => {
      life.closed(reason);
      release();
      if (this.#tunnels.get(info.id) === tunnel) this.#tunnels.delete(info.id);
      this.#o.onTunnelClosed?.(tunnel, reason);
    });
    this.#o.onTunnel?.(tunnel);
  }
}
