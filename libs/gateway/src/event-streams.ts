import type { Dispatcher } from 'undici';
import type { Clock } from '@switchyard/clock';
import { Http2EventStreams, type Dispatch } from './http2-streams.ts';
import type { GatewayLogger } from './options.ts';
import { hasCode } from './upstream.ts';

/** How long an origin that did not speak HTTP/2 is sent HTTP/1.1 before HTTP/2 is tried again. */
const HTTP1_FALLBACK_MS = 10 * 60_000;

/**
 * The TLS alert of a server that does not offer `h2` among its ALPN
 * protocols (Node's https servers and most TLS proxies without HTTP/2 on).
 */
const NO_H2_ALPN = 'ERR_SSL_TLSV1_ALERT_NO_APPLICATION_PROTOCOL';

/**
 * Where the gateway sends event streams (`GET /mcp`) bound for a scheduler:
 * HTTP/2, thousands of streams on a few connections; with prior knowledge
 * (h2c) on `http:` URLs, negotiated by ALPN on `https:` ones (TLS ended by
 * a proxy in front of the scheduler). A scheduler that answers the HTTP/2
 * preface as HTTP/1.1 would (a release from before h2c during a rolling
 * upgrade, or an HTTP/1.1-only hop in between), or a TLS front that does not
 * offer `h2`, fails the request before anything of it was processed; that
 * origin then gets HTTP/1.1 for HTTP1_FALLBACK_MS, and the stream is opened
 * again that way (a GET, so nothing is replayed).
 */
export class EventStreamUpstream {
  readonly #http2: Http2EventStreams;
  readonly #http1: Dispatcher;
  readonly #clock: Clock;
  readonly #logger: GatewayLogger;
  /** Origin → `Clock.monotonicNow()` reading until which it gets HTTP/1.1. */
  readonly #http1Until = new Map<string, number>();

  constructor(options: {
    http1: Dispatcher;
    streamsPerConnection: number;
    connectTimeoutMs: number;
    /** How long a connection without streams stays open. */
    idleTimeoutMs: number;
    /** How often a connection with streams is pinged (see Http2EventStreams). */
    pingIntervalMs: number;
    clock: Clock;
    logger: GatewayLogger;
  }) {
    this.#http2 = new Http2EventStreams(options);
    this.#http1 = options.http1;
    this.#clock = options.clock;
    this.#logger = options.logger;
  }

  dispatcherFor(origin: string): Dispatch {
    const until = this.#http1Until.get(origin);
    if (until === undefined) return this.#http2;
    if (this.#clock.monotonicNow() < until) return this.#http1;
    this.#http1Until.delete(origin);
    return this.#http2;
  }

  /**
   * True when `error`, from an HTTP/2 request to `origin`, shows the peer
   * does not speak HTTP/2; the origin then gets HTTP/1.1 from this one on.
   */
  fellBack(origin: string, error: unknown): boolean {
    const refused =
      (error as { code?: unknown } | undefined)?.code === 'ERR_HTTP2_ERROR' ||
      hasCode(error, (code) => code === NO_H2_ALPN);
    if (!refused) return false;
    if (this.#http1Until.has(origin)) return true;
    this.#http1Until.set(origin, this.#clock.monotonicNow() + HTTP1_FALLBACK_MS);
    this.#logger.warn(
      { origin, err: String((error as Error).message), forMs: HTTP1_FALLBACK_MS },
      origin.startsWith('https:')
        ? 'scheduler TLS endpoint does not offer HTTP/2 (ALPN h2); event streams use HTTP/1.1'
        : 'scheduler does not speak HTTP/2 with prior knowledge; event streams use HTTP/1.1',
    );
    return true;
  }

  close(): Promise<void> {
    return this.#http2.close();
  }
}
