import type { Counter, Gauge, Histogram } from 'prom-client';
import type { Metrics } from '@switchyard/service';
import { H2_TUNING } from '@switchyard/tunnel';

/** Streams a tunnel carries for traffic before it refuses more (see Tunnel). */
const TRAFFIC_STREAMS_MAX = H2_TUNING.maxConcurrentStreams - H2_TUNING.controlStreams;

export interface ReplicaMetrics {
  readonly isLeader: Gauge;
  readonly term: Gauge;
  readonly epoch: Gauge;
  readonly epochLagSeconds: Gauge;
  readonly cycleSeconds: Histogram;
  readonly commitBytes: Histogram;
  readonly snapshotsSent: Counter<'reason'>;
  readonly catchUpDeltas: Counter;
  readonly runtimes: Gauge<'state'>;
  readonly scheduleRequests: Counter<'outcome'>;
  readonly scheduleSeconds: Histogram;
  readonly proxyRequests: Counter;
  readonly relayConnections: Counter;
  readonly apiUnauthorized: Counter;
  readonly busiestTunnelStreams: Gauge;
  readonly runtimesOverStateLimit: Gauge;
  readonly redialWaits: Counter<'outcome'>;
  readonly tunnelsSuperseded: Counter;
  readonly gatewayConnectionsUnanswered: Counter;
}

/** What the replica's gauges read on every scrape. */
export interface LiveSources {
  /** Streams open on the busiest runtime tunnel this replica holds. */
  busiestTunnelStreams(): number;
  /** Runtimes whose tunnels this replica holds whose state is past runtimeState's limits. */
  runtimesOverStateLimit(): number;
  /** Seconds since the replica last knew its view current (0 before its first epoch). */
  epochLagSeconds(): number;
}

/** The replica's metrics (design brief §6); no per-runtime or per-session labels. */
export function createReplicaMetrics(metrics: Metrics, live: LiveSources): ReplicaMetrics {
  return {
    isLeader: metrics.gauge({ name: 'is_leader', help: '1 while this replica leads' }),
    term: metrics.gauge({ name: 'term', help: 'Highest leadership term seen' }),
    epoch: metrics.gauge({ name: 'epoch', help: 'Latest epoch applied by this replica' }),
    epochLagSeconds: metrics.gauge({
      name: 'epoch_lag_seconds',
      help: 'Time since this replica last knew its view current: an epoch applied, or a cycle with nothing to change',
      // Read at each scrape, whichever listener serves it (the replica's port or the app's metricsPort).
      collect: live.epochLagSeconds,
    }),
    cycleSeconds: metrics.histogram({
      name: 'epoch_cycle_seconds',
      help: 'Leader: duration of an epoch cycle, announce to commit',
      buckets: [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 5],
    }),
    commitBytes: metrics.histogram({
      name: 'epoch_commit_bytes',
      help: 'Leader: size of a commit message',
      buckets: [256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304],
    }),
    snapshotsSent: metrics.counter({
      name: 'epoch_snapshots_sent_total',
      help: 'Leader: snapshots of the latest epoch sent to followers, by reason: attached (a new connection), asked (the follower saw a gap), behind (it missed more epochs than the leader keeps, or changes as large as the state), oversized (the delta was above its connection limits)',
      labelNames: ['reason'],
    }),
    catchUpDeltas: metrics.counter({
      name: 'epoch_catch_up_deltas_total',
      help: 'Leader: deltas sent to followers that missed epochs while their connection was busy, each from the epoch the follower took last to the latest, in place of a snapshot',
    }),
    runtimes: metrics.gauge({ name: 'runtimes', help: 'Runtimes in the latest epoch by state', labelNames: ['state'] }),
    scheduleRequests: metrics.counter({
      name: 'schedule_requests_total',
      help: 'Schedule requests by outcome (thread, process, pipeline, unschedulable, bad_request, forwarded)',
      labelNames: ['outcome'],
    }),
    scheduleSeconds: metrics.histogram({
      name: 'schedule_duration_seconds',
      help: 'Time to answer a schedule request from the local epoch',
      buckets: [0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.05],
    }),
    proxyRequests: metrics.counter({ name: 'proxy_requests_total', help: 'Requests received on /api/proxy' }),
    relayConnections: metrics.counter({
      name: 'relay_connections_total',
      help: 'Relay connections asked for on /api/relay (each carries many requests)',
    }),
    apiUnauthorized: metrics.counter({
      name: 'api_unauthorized_total',
      help: 'API requests, relay connections and HTTP/2 streams refused for a missing or wrong API token',
    }),
    redialWaits: metrics.counter({
      name: 'redial_waits_total',
      help: 'Waits for a runtime whose tunnel here broke or went silent, by how they ended: back (it redialled here), moved (an epoch showed it behind another replica), gone (over without it: its requests got 502)',
      labelNames: ['outcome'],
    }),
    tunnelsSuperseded: metrics.counter({
      name: 'tunnels_superseded_total',
      help: 'Tunnels closed here because their runtime stopped pinging on them and an epoch showed it behind another replica on a newer connection',
    }),
    gatewayConnectionsUnanswered: metrics.counter({
      name: 'gateway_connections_unanswered_total',
      help: "Gateways' HTTP/2 connections closed here because a ping went unanswered (a gateway vanished or partitioned), with their streams",
    }),
    busiestTunnelStreams: metrics.gauge({
      name: 'tunnel_streams_busiest',
      help: `Streams open on the busiest runtime tunnel held here; at ${TRAFFIC_STREAMS_MAX} new requests to it get 503`,
      collect: () => live.busiestTunnelStreams(),
    }),
    runtimesOverStateLimit: metrics.gauge({
      name: 'runtimes_over_state_limit',
      help: 'Runtimes whose tunnels this replica holds that report more processes or threads than runtimeState allows: no new sandbox goes to them until they report less',
      collect: () => live.runtimesOverStateLimit(),
    }),
  };
}
