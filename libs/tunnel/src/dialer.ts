import type http from 'node:http';
import http2 from 'node:http2';
import WebSocket from 'ws';
import { systemClock } from '@switchyard/clock';
import type { Clock, Timer } from '@switchyard/clock';
import { RUNTIME_INFO_HEADER } from '@switchyard/protocol';
import type { RuntimeInfo } from '@switchyard/protocol';
import { BACKOFF_DEFAULTS, backoffDelayMs } from './backoff.ts';
import type { BackoffOptions } from './backoff.ts';
import { CONNECT_PATH, H2_TUNING, TUNNEL_DEFAULTS, h2Settings, silentLogger } from './defaults.ts';
import type { TunnelLogger } from './defaults.ts';
import { Heartbeat } from './heartbeat.ts';
import { LengthDeclaringResponse } from './response.ts';
import { byteStream, probe } from './wire.ts';

export interface DialTunnelOptions {
  /** Scheduler base URL, `ws(s)://` or `http(s)://`; `/api/runtime/connect` is appended. */
  readonly url: string;
  readonly token: string;
  readonly info: RuntimeInfo;
  /** Serves every stream the scheduler opens, on http2 compat objects (not express). */
  readonly handler: (req: http2.Http2ServerRequest, res: http2.Http2ServerResponse) => void;
  /** Liveness probe period. Default 5000 ms. */
  readonly pingIntervalMs?: number;
  /** Default = pingIntervalMs. */
  readonly pingTimeoutMs?: number;
  readonly backoff?: BackoffOptions;
  readonly clock?: Clock;
  readonly logger?: TunnelLogger;
  /** Source of jitter; default Math.random. */
  readonly random?: () => number;
  readonly onConnected?: () => void;
  readonly onDisconnected?: (reason: string) => void;
}

/** The runtime's side: keeps one tunnel to the scheduler up. */
export interface TunnelDialer {
  /** True while a tunnel is open. */
  readonly connected: boolean;
  /** GOAWAY to the scheduler, stop reconnecting. Idempotent. */
  close(): void;
}

/**
 * Dials the scheduler and serves HTTP/2 over the WebSocket, reconnecting
 * forever with exponential backoff and jitter (250 ms doubling to 30 s by
 * default; reset after a successful connect). A 400/401 refusal is logged
 * with its status and body and retried at the maximum delay, since it will
 * not heal by itself soon. Not guaranteed: that requests in flight survive a
 * reconnect (they fail; the scheduler decides about retries).
 */
export function dialTunnel(options: DialTunnelOptions): TunnelDialer {
  return new Dialer(options);
}

interface Link {
  readonly ws: WebSocket;
  session: http2.ServerHttp2Session | undefined;
  heartbeat: Heartbeat | undefined;
  down: boolean;
}

class Dialer implements TunnelDialer {
  readonly #o: DialTunnelOptions;
  readonly #clock: Clock;
  readonly #logger: TunnelLogger;
  readonly #server: http2.Http2Server<
    typeof http.IncomingMessage,
    typeof http.ServerResponse,
    typeof http2.Http2ServerRequest,
    typeof LengthDeclaringResponse
  >;
  readonly #url: string;
  #attempt = 0;
  #link: Link | undefined;
  #retry: Timer | undefined;
  #closed = false;
  connected = false;

  constructor(o: DialTunnelOptions) {
    this.#o = o;
    this.#clock = o.clock ?? systemClock;
    this.#logger = o.logger ?? silentLogger;
    const base = new URL(o.url);
    base.protocol = base.protocol === 'https:' || base.protocol === 'wss:' ? 'wss:' : 'ws:';
    base.pathname = base.pathname.replace(/\/$/, '') + CONNECT_PATH;
    this.#url = base.toString();
    this.#server = http2.createServer(
      {
        settings: h2Settings(),
        maxSessionMemory: H2_TUNING.maxSessionMemoryMb,
        Http2ServerResponse: LengthDeclaringResponse,
      },
      o.handler,
    );
    this.#connect();
  }

  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#retry?.cancel();
    const link = this.#link;
    if (!link) return;
    // GOAWAY tells the scheduler no new streams will be served; the socket then goes.
    if (link.session && !link.session.destroyed) link.session.close();
    this.#clock.setTimeout(() => this.#down(link, 'dialer closed'), TUNNEL_DEFAULTS.closeGraceMs);
    link.session?.once('close', () => this.#down(link, 'dialer closed'));
    if (!link.session) this.#down(link, 'dialer closed');
  }

  #connect(): void {
    if (this.#closed) return;
    const encoded = Buffer.from(JSON.stringify(this.#o.info)).toString('base64url');
    const ws = new WebSocket(this.#url, {
      perMessageDeflate: false,
      maxPayload: TUNNEL_DEFAULTS.wsPayloadBytesMax,
      // Masking guards browser-scripted payloads against poisoning caching proxies (RFC 6455 §10.3); here the
      // payload is HTTP/2 frames from our own runtime, and XOR-ing every byte halved single-stream throughput.
      // ws skips the XOR on both ends for an all-zero key.
      generateMask: (mask: Buffer) => void mask.fill(0),
      headers: { authorization: `Bearer ${this.#o.token}`, [RUNTIME_INFO_HEADER]: encoded },
    });
    const link: Link = { ws, session: undefined, heartbeat: undefined, down: false };
    this.#link = link;
    ws.on('error', (error) => this.#down(link, `websocket error: ${error.message}`));
    ws.once('close', (code) => this.#down(link, `websocket closed (${code})`));
    ws.once('unexpected-response', (_req, res) => {
      const chunks: Buffer[] = [];
      let size = 0;
      res.on('data', (chunk: Buffer) => {
        // The body is a short JSON refusal; keep at most 4 KiB of it for the log.
        if (size < 4096) chunks.push(chunk);
        size += chunk.length;
      });
      res.once('end', () => {
        const status = res.statusCode ?? 0;
        const body = Buffer.concat(chunks).toString('utf8').slice(0, 4096);
        this.#logger.error({ status, body, url: this.#url }, 'scheduler refused the tunnel');
        this.#down(link, `refused with ${status}`, status === 400 || status === 401);
      });
      res.once('error', () => this.#down(link, `refused with ${res.statusCode}`));
    });
    ws.once('open', () => this.#up(link));
  }

  #up(link: Link): void {
    if (this.#closed || link.down) return void link.ws.terminate();
    this.#server.once('session', (session: http2.ServerHttp2Session) => {
      link.session = session;
      session.on('error', (error) => this.#down(link, `session error: ${error.message}`));
      session.once('close', () => this.#down(link, 'session closed'));
      session.once('connect', () => session.setLocalWindowSize(H2_TUNING.sessionWindowBytes));
    });
    this.#server.emit('connection', byteStream(link.ws));
    const pingIntervalMs = this.#o.pingIntervalMs ?? TUNNEL_DEFAULTS.pingIntervalMs;
    link.heartbeat = new Heartbeat({
      clock: this.#clock,
      intervalMs: pingIntervalMs,
      timeoutMs: this.#o.pingTimeoutMs ?? pingIntervalMs,
      probe: () => (link.session ? probe(link.session, link.ws) : Promise.reject(new Error('no session'))),
      onRtt: () => {},
      onDead: (reason) => this.#down(link, reason),
    });
    this.#attempt = 0;
    this.connected = true;
    this.#logger.info({ url: this.#url, runtime: this.#o.info.id }, 'tunnel connected');
    this.#o.onConnected?.();
  }

  /** Tears one link down (once) and schedules the next dial unless closed. */
  #down(link: Link, reason: string, refused = false): void {
    if (link.down) return;
    link.down = true;
    link.heartbeat?.stop();
    if (link.session && !link.session.destroyed) link.session.destroy();
    link.ws.terminate();
    const wasConnected = this.connected && this.#link === link;
    if (this.#link === link) this.connected = false;
    if (wasConnected) {
      // A close asked for (the runtime stopping) is no trouble to warn of, whichever end noticed first.
      if (this.#closed) this.#logger.info({ runtime: this.#o.info.id, reason }, 'tunnel closed');
      else this.#logger.warn({ runtime: this.#o.info.id, reason }, 'tunnel disconnected');
      this.#o.onDisconnected?.(reason);
    }
    if (this.#closed || this.#link !== link) return;
    const random = this.#o.random ?? Math.random;
    const maxMs = this.#o.backoff?.maxMs ?? BACKOFF_DEFAULTS.maxMs;
    const delayMs = refused
      ? backoffDelayMs(0, { ...this.#o.backoff, initialMs: maxMs }, random)
      : backoffDelayMs(this.#attempt++, this.#o.backoff ?? {}, random);
    this.#retry = this.#clock.setTimeout(() => this.#connect(), delayMs);
  }
}
