import { Counter, Gauge, Histogram } from 'prom-client';
import type { Registry } from 'prom-client';

/** Everything the gateway counts. Labels are bounded sets: no session, process or principal labels. */
export interface GatewayMetrics {
  request(method: string, code: number): void;
  upstreamError(reason: UpstreamErrorReason): void;
  scheduleLatency(seconds: number, outcome: 'ok' | 'unschedulable' | 'error'): void;
  routeLookup(result: 'hit' | 'miss', tier: 'memory' | 'redis'): void;
  /** A route cache command Redis failed or that could not be sent to it; the request went on without. */
  routeCacheRedisFailed(op: RouteCacheRedisOp): void;
  sseOpened(): void;
  sseClosed(): void;
  /** A scheduler refused a relay connection (its requests then go through `/api/proxy` for a while). */
  relayRefused(): void;
  /** A request went through `/api/proxy` because its runtime's relays already carried as many as they may. */
  relayLimitReached(): void;
  /** A scheduler ask went unanswered long enough that another replica was asked too. */
  scheduleHedged(): void;
  /** A route now names the replica its runtime moved to, after the one it named forwarded a request there. */
  routeFollowed(): void;
  /** The gateway refused a request itself: nothing of it was sent upstream. */
  refused(reason: RefusalReason): void;
}

/**
 * Why a request failed upstream (`upstream_errors_total{reason}`), the
 * reasons docs/operations.md lists. A failure to place a request (no
 * scheduler answered) is no upstream error: the gateway answers it 503
 * itself, counted in `requests_total`. Each is exported from 0, so that a
 * rate over any of them has a series before its first failure.
 */
export const UPSTREAM_ERROR_REASONS = [
  'connect',
  'gone',
  'reset',
  'stream',
  'timeout',
  'aborted',
  'tls',
  'unauthorized',
  'silent',
  'streams_full',
] as const;

export type UpstreamErrorReason = (typeof UPSTREAM_ERROR_REASONS)[number];

/**
 * Why the gateway refused a request itself (`refusals_total{reason}`): the
 * error code of the answer where that code has one cause, else the cause
 * (`forbidden` is `origin`, `insufficient_scope`, `class_scope` or `tool_scope`;
 * `unauthorized` one of the token reasons; `not_ready` `jwks_unavailable` or
 * `shutting_down`). A fixed set, each exported from 0, so that a rate over
 * any of them has a series before its first refusal.
 */
export const REFUSAL_REASONS = [
  'header_too_large',
  'origin',
  'method_not_allowed',
  'unsupported_protocol_version',
  'no_token',
  'invalid_token',
  'expired_token',
  'wrong_audience',
  'insufficient_scope',
  'class_scope',
  'tool_scope',
  'jwks_unavailable',
  'too_many_requests',
  'body_too_large',
  'request_timeout',
  'parse_error',
  'invalid_request',
  'bad_identity',
  'session_required',
  'shutting_down',
] as const;

export type RefusalReason = (typeof REFUSAL_REASONS)[number];

/**
 * What the route cache asks of Redis (`route_cache_redis_failures_total{op}`):
 * a lookup, a route written, one renewed on use, one deleted. Each exported
 * from 0, so that an alert on their rate has a series before the first failure.
 */
export const ROUTE_CACHE_REDIS_OPS = ['read', 'write', 'renew', 'delete'] as const;

export type RouteCacheRedisOp = (typeof ROUTE_CACHE_REDIS_OPS)[number];

const noop = (): void => {};
export const noMetrics: GatewayMetrics = {
  request: noop,
  upstreamError: noop,
  scheduleLatency: noop,
  routeLookup: noop,
  routeCacheRedisFailed: noop,
  sseOpened: noop,
  sseClosed: noop,
  relayRefused: noop,
  relayLimitReached: noop,
  scheduleHedged: noop,
  routeFollowed: noop,
  refused: noop,
};

const HTTP_METHODS = new Set(['GET', 'POST', 'DELETE']);
/**
 * Distinct (method, status) children kept bound: four method values times
 * Node's registered statuses (63) and `other`. Statuses come from upstream,
 * where a runtime may answer any three digits the gateway then relays, so
 * an unregistered one is counted as `other`: the label set stays bounded.
 */
const REQUEST_CHILDREN_MAX = 256;

// Not imported from 'node:http': an ESM import of it loads Node's fetch, which
// the gateway never uses (see upstream-checks.ts).
const { STATUS_CODES } = process.getBuiltinModule('node:http');

/** The `code` label of a status: itself when registered, else `other`. */
function codeLabel(code: number): string {
  return Object.hasOwn(STATUS_CODES, code) ? String(code) : 'other';
}

/**
 * Returns `make(key)` once per key, then the same value. Labelled children
 * are bound once: a labels object per observation costs a sort and a string
 * hash in prom-client, on every request.
 */
function memo<T>(make: (key: string) => T, max = Infinity): (key: string) => T {
  const seen = new Map<string, T>();
  return (key) => {
    let value = seen.get(key);
    if (value === undefined) {
      value = make(key);
      if (seen.size < max) seen.set(key, value);
    }
    return value;
  };
}

/**
 * The children of a counter with one label (`label`), one per value of a
 * fixed set, each exported from 0: a series exists before its first increment.
 */
function childrenFromZero<R extends string>(
  counter: Counter<string>,
  label: string,
  values: readonly R[],
): Record<R, { inc(): void }> {
  return Object.fromEntries(
    values.map((value) => {
      const labels = { [label]: value };
      counter.inc(labels, 0);
      return [value, counter.labels(labels)];
    }),
  ) as Record<R, { inc(): void }>;
}

/** Registers the gateway's metrics on `registry` under `prefix`. */
export function createMetrics(registry: Registry, prefix: string): GatewayMetrics {
  const registers = [registry];
  const requests = new Counter({
    name: `${prefix}requests_total`,
    help: 'Requests by HTTP method and status code',
    labelNames: ['method', 'code'],
    registers,
  });
  const upstreamErrors = new Counter({
    name: `${prefix}upstream_errors_total`,
    help: 'Upstream failures by reason',
    labelNames: ['reason'],
    registers,
  });
  const schedule = new Histogram({
    name: `${prefix}schedule_duration_seconds`,
    help: 'Latency of scheduler calls, failover included',
    labelNames: ['outcome'],
    buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
    registers,
  });
  const lookups = new Counter({
    name: `${prefix}route_cache_lookups_total`,
    help: 'Route cache lookups by result (hit, miss) and tier (memory, redis)',
    labelNames: ['result', 'tier'],
    registers,
  });
  const redisFailures = new Counter({
    name: `${prefix}route_cache_redis_failures_total`,
    help: 'Route cache commands Redis failed, timed out, or could not be sent while it was away, by operation (read, write, renew, delete); the requests went on without Redis',
    labelNames: ['op'],
    registers,
  });
  const sse = new Gauge({ name: `${prefix}sse_streams_open`, help: 'Open SSE response streams', registers });
  const relayRefusals = new Counter({
    name: `${prefix}relay_refusals_total`,
    help: 'Relay connections a scheduler refused; that runtime is then reached through /api/proxy for a while',
    registers,
  });
  const pastRelayLimit = new Counter({
    name: `${prefix}relay_limit_reached_total`,
    help: 'Requests sent through /api/proxy because 128 were already in flight on relays to their runtime through that replica',
    registers,
  });
  const hedges = new Counter({
    name: `${prefix}schedule_hedges_total`,
    help: 'Scheduler asks sent because an earlier ask of the same call went unanswered for 250 ms',
    registers,
  });
  const followed = new Counter({
    name: `${prefix}routes_followed_total`,
    help: 'Routes moved to the scheduler replica their runtime redialled, after the one they named forwarded a request there',
    registers,
  });
  const refusals = new Counter({
    name: `${prefix}refusals_total`,
    help: 'Requests the gateway refused itself, sending nothing upstream, by reason',
    labelNames: ['reason'],
    registers,
  });
  const refusalChild = childrenFromZero(refusals, 'reason', REFUSAL_REASONS);
  const errorChild = childrenFromZero(upstreamErrors, 'reason', UPSTREAM_ERROR_REASONS);
  const redisFailureChild = childrenFromZero(redisFailures, 'op', ROUTE_CACHE_REDIS_OPS);
  const requestChild = memo((key) => {
    const space = key.indexOf(' ');
    return requests.labels({ method: key.slice(0, space), code: key.slice(space + 1) });
  }, REQUEST_CHILDREN_MAX);
  const scheduleChild = memo((outcome) => schedule.labels({ outcome }));
  const lookupChild = memo((key) => {
    const [result, tier] = key.split(' ');
    return lookups.labels({ result: result!, tier: tier! });
  });
  return {
    // Unknown methods collapse into one label value so clients cannot grow the series set.
    request: (method, code) => requestChild(`${HTTP_METHODS.has(method) ? method : 'OTHER'} ${codeLabel(code)}`).inc(),
    upstreamError: (reason) => errorChild[reason].inc(),
    scheduleLatency: (seconds, outcome) => scheduleChild(outcome).observe(seconds),
    routeLookup: (result, tier) => lookupChild(`${result} ${tier}`).inc(),
    routeCacheRedisFailed: (op) => redisFailureChild[op].inc(),
    sseOpened: () => sse.inc(),
    sseClosed: () => sse.dec(),
    relayRefused: () => relayRefusals.inc(),
    relayLimitReached: () => pastRelayLimit.inc(),
    scheduleHedged: () => hedges.inc(),
    routeFollowed: () => followed.inc(),
    refused: (reason) => refusalChild[reason].inc(),
  };
}
