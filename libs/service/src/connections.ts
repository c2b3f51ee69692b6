import type { Server } from 'node:net';
import { Throttle, systemClock, type Clock } from '@switchyard/clock';
import type { Metrics } from './metrics.ts';

/**
 * A listener's connectionsMax when none is given: the gateway's /mcp port
 * (10,000 idle event streams with room for requests), a scheduler replica's
 * (a thousand tunnels and a burst of /api/proxy calls, one connection each)
 * and a runtime's direct listener.
 */
export const CONNECTIONS_MAX_DEFAULT = 16_384;

/** At most one warning about refused connections in this long; the next says how many it stands for. */
export const CONNECTIONS_REFUSED_LOG_INTERVAL_MS = 10_000;

export interface ConnectionCapOptions {
  /** Connections the listener holds at once, of every kind (requests, event streams, upgraded sockets). */
  readonly connectionsMax: number;
  /** Where `connections_refused_total` is counted, and `connections_open` and `connections_max` read. */
  readonly metrics: Metrics;
  readonly logger: { warn(fields: Record<string, unknown>, message: string): void };
  /** Default: the system clock. */
  readonly clock?: Clock;
}

/**
 * Caps the connections `server` holds at once (Node's `maxConnections`):
 * one more is closed as soon as it is accepted, before a byte of it is
 * read, and counted in `switchyard_<app>_connections_refused_total`. Those
 * already open are not touched. A warning says so at the first refusal and
 * then at most once per CONNECTIONS_REFUSED_LOG_INTERVAL_MS, with how many
 * it held back (`unlogged`). `switchyard_<app>_connections_open` reads, at
 * each scrape, the count the cap is held against, and
 * `switchyard_<app>_connections_max` the cap: an alert on their ratio fires
 * before the first refusal, which the counter alone reports only once the
 * listener is full. One capped listener per registry (a second would clash
 * on the names).
 *
 * Why: without a cap, a flood of connections (each held up to the
 * listener's header or handshake deadline, many at once) is bounded only by
 * the process's descriptors and memory; past those the process fails or is
 * killed, and every stream it holds goes with it. A refused newcomer costs
 * less than that.
 *
 * Not covered: the refused client gets no HTTP answer (TLS has not started,
 * nothing is read): it sees the connection closed or reset.
 */
export function capConnections(server: Server, options: ConnectionCapOptions): void {
  const { connectionsMax, logger } = options;
  const refused = options.metrics.counter({
    name: 'connections_refused_total',
    help: 'Connections closed at once because the listener held connectionsMax already',
  });
  const throttle = new Throttle(options.clock ?? systemClock, CONNECTIONS_REFUSED_LOG_INTERVAL_MS, 1);
  options.metrics.gauge({
    name: 'connections_open',
    help: 'Connections the capped listener holds (every kind), against connections_max',
    collect: () =>
      new Promise<number>((resolve) => server.getConnections((error, count) => resolve(error ? 0 : count))),
  });
  options.metrics
    .gauge({ name: 'connections_max', help: 'Connections the capped listener holds at most (connectionsMax)' })
    .set(connectionsMax);
  server.maxConnections = connectionsMax;
  server.on('drop', (peer) => {
    refused.inc();
    const unlogged = throttle.pass('refused');
    if (unlogged === undefined) return;
    logger.warn(
      { connectionsMax, remote: peer?.remoteAddress, ...(unlogged ? { unlogged } : {}) },
      'connection refused: the listener holds connectionsMax connections already',
    );
  });
}
