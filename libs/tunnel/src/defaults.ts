import type http2 from 'node:http2';
import { FORWARDED_HEADER_BYTES_MAX } from '@switchyard/protocol';

/**
 * HTTP/2 tuning shared by both ends of the tunnel. Node's defaults (10 MB of
 * session memory, 64 KiB windows) trip ENHANCE_YOUR_CALM under many streams and
 * cap one stream far below the link; these were measured on loopback.
 */
export const H2_TUNING = {
  /** Per-session memory budget in megabytes (nghttp2 buffers, headers, outbound queue). */
  maxSessionMemoryMb: 256,
  /** Window each new stream starts with: what a paused reader may leave buffered. */
  streamWindowBytes: 2 * 1024 * 1024,
  /** Connection-wide receive window, shared by every stream of the session. */
  sessionWindowBytes: 64 * 1024 * 1024,
  /** Largest DATA frame; bigger frames mean fewer WebSocket messages per byte. */
  maxFrameBytes: 256 * 1024,
  /** Streams one tunnel may carry at once: the scheduler opens no more. */
  maxConcurrentStreams: 4096,
  /**
   * Streams the runtime takes beyond that. Node counts a stream the
   * scheduler reset until the runtime's JavaScript has let go of it, a few
   * ticks later; a new stream read in the same batch as that reset would be
   * refused (RST_STREAM ENHANCE_YOUR_CALM) at a limit the scheduler still
   * keeps to. So the runtime advertises, and takes, a few more.
   */
  runtimeStreamsSlack: 64,
  /**
   * Streams of that limit traffic leaves to the scheduler's own requests
   * (`Tunnel.fetch`, its `/watch`), so it can still watch a runtime whose
   * clients hold every other stream.
   */
  controlStreams: 8,
  /** Header list bound per request, in bytes: what the gateway may forward. */
  maxHeaderListBytes: FORWARDED_HEADER_BYTES_MAX,
  /**
   * Stream resets the runtime takes from the scheduler at once, and per second
   * after. nghttp2 guards servers against "rapid reset" floods by closing the
   * connection past 1,000 at once or 33 a second; but the scheduler resets a
   * tunnel stream for every client that leaves, and clients leave together (a
   * gateway restarted, a load balancer dropped). The tunnel then went down with
   * every other session's request on it. Twice the stream limit at once, and a
   * quarter of it a second, bound a scheduler gone wrong without that.
   */
  streamResetBurst: 2 * 4096,
  streamResetsPerSecond: 4096 / 4,
} as const;

/** SETTINGS both sides advertise; the runtime's take `runtimeStreamsSlack` more streams. */
export function h2Settings(side: 'scheduler' | 'runtime'): http2.Settings {
  const slack = side === 'runtime' ? H2_TUNING.runtimeStreamsSlack : 0;
  return {
    initialWindowSize: H2_TUNING.streamWindowBytes,
    maxFrameSize: H2_TUNING.maxFrameBytes,
    maxConcurrentStreams: H2_TUNING.maxConcurrentStreams + slack,
    maxHeaderListSize: H2_TUNING.maxHeaderListBytes,
    enablePush: false,
  };
}

/** Liveness and admission defaults (milliseconds and bytes). */
export const TUNNEL_DEFAULTS = {
  pingIntervalMs: 5_000,
  /** Largest total size of the connect request's headers. */
  headerBytesMax: 16 * 1024,
  /** Largest WebSocket message accepted; HTTP/2 frames are far smaller. */
  wsPayloadBytesMax: 4 * 1024 * 1024,
  /** Time a GOAWAY'd session gets to finish before it is destroyed. */
  closeGraceMs: 1_000,
  /**
   * The same for a tunnel whose runtime sent GOAWAY (it is stopping): its
   * requests in flight may be tool calls it lets finish, within its own bound.
   */
  runtimeGoawayGraceMs: 30_000,
  /**
   * How long a runtime keeps an idle relay connection (announced in
   * `Keep-Alive`, so the gateway closes first). A new relay costs a
   * connection, an upgrade and a CONNECT stream, more than a request; agents
   * call tools seconds apart, so relays stay for a minute, not Node's 5 s.
   */
  relayKeepAliveMs: 60_000,
  /**
   * Deadlines on receiving a request on a relay connection, Node's defaults
   * for any server: a relay opened and never used, or one trickling a
   * request, would otherwise hold its tunnel stream for ever (a gateway
   * sends each request whole, at once). Checked every relayCheckIntervalMs.
   */
  relayHeadersTimeoutMs: 60_000,
  relayRequestTimeoutMs: 300_000,
  relayCheckIntervalMs: 30_000,
  /** The same bound on a request body that reaches a scheduler as an HTTP/2 stream (h2c). */
  streamRequestTimeoutMs: 300_000,
} as const;

/** Where runtimes dial in. */
export const CONNECT_PATH = '/api/runtime/connect';

/**
 * The debug data of the GOAWAY that closes a tunnel because another
 * connection with the same runtime id replaced it. A runtime can only get it
 * on the tunnel it holds from another process that took its id (its own
 * redial replaces a tunnel it has already dropped), so the reference dialer
 * waits 5 minutes instead of taking the id back at once (protocol.md §1).
 */
export const GOAWAY_REPLACED = 'switchyard: replaced by a newer connection with this runtime id';

/** `:authority` of the CONNECT stream a relay connection runs on; a runtime accepts any. */
export const RELAY_AUTHORITY = 'runtime:80';

/** Minimal structured logger; pino fits it. */
export interface TunnelLogger {
  info(obj: object, msg: string): void;
  warn(obj: object, msg: string): void;
  error(obj: object, msg: string): void;
}

export const silentLogger: TunnelLogger = { info() {}, warn() {}, error() {} };
