import type { Clock } from '@switchyard/clock';
import type { CarrierTransport } from './carrier.ts';

/**
 * `http2` tunnels in a row on which the scheduler never spoke HTTP/2 (its
 * SETTINGS never came) before `auto` dials WebSocket instead. One alone may
 * be a replica stopping between its 101 and its first frame; two in a row
 * are something in between that answers or passes the upgrade and then
 * drops or stalls the connection, and would do so for every dial.
 */
export const HTTP2_SILENT_TUNNELS_MAX = 2;

/**
 * How long `auto` then dials WebSocket before it asks for `http2` again
 * (at the next dial after that: a tunnel that is up is never dropped for
 * it). A proxy fixed or replaced gets the faster transport back within
 * this, at the cost of one more dropped tunnel each time while it is not.
 */
export const HTTP2_RETRY_MS = 30 * 60_000;

/**
 * What a dialer with transport `auto` asks for first. A refused `http2`
 * upgrade is handled within the dial (the dialer asks for `websocket` at
 * once); this remembers what a refusal does not show: an `http2` upgrade
 * answered with 101 whose connection then carries no HTTP/2 from the
 * scheduler. Not remembered across restarts.
 */
export class AutoTransport {
  readonly #clock: Clock;
  #silent = 0;
  /** While set, dials ask for `websocket` until this monotonic reading; after it, a retry of `http2`. */
  #websocketUntil: number | undefined;

  constructor(clock: Clock) {
    this.#clock = clock;
  }

  /** The transport the next dial asks for first. */
  first(): CarrierTransport {
    return this.#websocketUntil !== undefined && this.#clock.monotonicNow() < this.#websocketUntil
      ? 'websocket'
      : 'http2';
  }

  /**
   * An `http2` tunnel ended; `spoke`: the scheduler's HTTP/2 came through on
   * it. Answers whether dials now go to WebSocket (for HTTP2_RETRY_MS). A
   * retry after that period that fails the same way goes back at once.
   */
  ended(spoke: boolean): boolean {
    if (spoke) {
      this.#silent = 0;
      this.#websocketUntil = undefined;
      return false;
    }
    const retrying = this.#websocketUntil !== undefined;
    if (!retrying && ++this.#silent < HTTP2_SILENT_TUNNELS_MAX) return false;
    this.#silent = 0;
    this.#websocketUntil = this.#clock.monotonicNow() + HTTP2_RETRY_MS;
    return true;
  }
}
