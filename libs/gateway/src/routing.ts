import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Dispatcher } from 'undici';
import {
  MCP_SESSION_HEADER,
  RUNTIME_DIRECT_REALM,
  SCHEDULER_API_REALM,
  SwitchyardError,
  isIdentityValue,
} from '@switchyard/protocol';
import type { ScheduleRequestInput } from '@switchyard/protocol';
import { sleep } from '@switchyard/clock';
import type { Clock } from '@switchyard/clock';
import { randomId, resolvePart } from './identity.ts';
import type { IdentitySource, IdentityStrategy } from './identity.ts';
import { GATEWAY_DEFAULTS } from './options.ts';
import { parseSearch } from './request-target.ts';
import type { RequestTarget } from './request-target.ts';
import type { GatewayLogger } from './options.ts';
import type { GatewayMetrics } from './metrics.ts';
import type { Route, RouteCache } from './route-cache.ts';
import type { Placement, SchedulerClient } from './scheduler-client.ts';
import { attempt } from './forward.ts';
import type { Attempt } from './forward.ts';
import { isUpstreamFailure } from './exchange.ts';
import type { RelayEnd, UpstreamResponse } from './exchange.ts';
import type { EventStreamUpstream } from './event-streams.ts';
import type { Dispatch } from './http2-streams.ts';
import type { ThrottledLog } from './throttled-log.ts';
import type { RelayConnections } from './relay-connections.ts';
import { UPSTREAM_SILENT } from './upstream-checks.ts';
import {
  RUNTIME_TOKEN_REFUSED,
  SCHEDULER_TOKEN_REFUSED,
  isEventStream,
  hasCode,
  isHeadersTimeout,
  isStreamsFullAnswer,
  isTlsFailure,
  RUNTIME_STREAMS_FULL,
  refusedGatewayToken,
  upstreamHeaders,
} from './upstream.ts';
import { sendError } from './wire.ts';
import type { MessageInfo } from './wire.ts';

/** Everything a routed request needs; built once per gateway. */
export interface RoutingContext {
  readonly dispatcher: Dispatcher;
  /** For `GET` event streams through a scheduler (HTTP/2, see `eventStreamsOverHttp2`); else `dispatcher`. */
  readonly eventStreams?: EventStreamUpstream;
  /** For every other request through a scheduler (see `relayConnections`); else `dispatcher`. */
  readonly relays?: RelayConnections;
  readonly scheduler: SchedulerClient;
  readonly cache: RouteCache;
  readonly clock: Clock;
  readonly logger: GatewayLogger;
  readonly metrics: GatewayMetrics;
  readonly upstreamMode: 'proxy' | 'direct';
  /** `Authorization` for runtimes' direct listeners, asked per request; sent on direct routes only. */
  readonly upstreamAuthorization?: () => string | undefined;
  /** `Authorization` for schedulers' API, asked per request; sent on routes through a scheduler (relays: on the upgrade only). */
  readonly schedulerAuthorization?: () => string | undefined;
  /** Where trouble with an upstream is reported, throttled per upstream (a refused token, a failing TLS handshake). */
  readonly upstreamLog: ThrottledLog;
  readonly idleTimeoutMs: number;
  readonly chains: {
    readonly class: readonly IdentityStrategy[];
    readonly process: readonly IdentityStrategy[];
    readonly thread: readonly IdentityStrategy[];
  };
  readonly defaultClass: string;
}

/** One request after the security gates: who sent it and what it carries. */
export interface Routed {
  readonly req: IncomingMessage;
  readonly res: ServerResponse;
  readonly target: RequestTarget;
  readonly principal?: string;
  readonly body?: Buffer;
  readonly info?: MessageInfo;
  readonly signal: AbortSignal;
}

const LEGACY_GONE = new Set([404, 502]);
const STATELESS_GONE = new Set([502]);
const threadKey = (thread: string): string => `thread:${thread}`;
const processKey = (cls: string, process: string): string => `process:${cls}/${process}`;

function source(r: Routed, sessionId?: string): IdentitySource {
  let query: Readonly<Record<string, unknown>> | undefined;
  return {
    headers: r.req.headers,
    // Parsed on first use: the default strategies never read the query.
    get query() {
      return (query ??= parseSearch(r.target.search));
    },
    params: r.target.params,
    ...(sessionId !== undefined ? { sessionId } : {}),
    ...(r.principal !== undefined ? { principal: r.principal } : {}),
  };
}

function routeOf(ctx: RoutingContext, p: Placement, principal?: string): Route {
  const direct = ctx.upstreamMode === 'direct' && p.address !== undefined;
  const base = direct ? p.address! : p.proxyUrl;
  return {
    runtime: p.runtime,
    url: `${base.replace(/\/+$/, '')}/mcp`,
    ...(principal ? { principal } : {}),
    ...(direct ? { direct } : {}),
  };
}

/**
 * Starts relaying and returns at once: the request's async frames (and all
 * they hold) end here instead of living as long as the stream, which for an
 * open GET stream is most of what it costs. Its end is reported to one
 * callback per routing context (relayEndOf), so an open stream holds neither
 * a promise nor a closure of its own for it.
 */
function relay(ctx: RoutingContext, r: Routed, upstream: UpstreamResponse): void {
  if (isEventStream(upstream.headers)) ctx.metrics.sseOpened();
  upstream.relay(r.res, ctx.idleTimeoutMs, relayEndOf(ctx));
}

const relayEnds = new WeakMap<RoutingContext, RelayEnd>();

function relayEndOf(ctx: RoutingContext): RelayEnd {
  let end = relayEnds.get(ctx);
  if (!end) {
    const { metrics } = ctx;
    end = (outcome, eventStream) => {
      if (outcome !== 'complete') metrics.upstreamError(outcome === 'cancelled' ? 'aborted' : 'stream');
      if (eventStream) metrics.sseClosed();
    };
    relayEnds.set(ctx, end);
  }
  return end;
}

/**
 * One request to the route's runtime. A failure after the request left (the
 * runtime reset or closed the connection, or sent no head in time) is the
 * upstream's, so the client gets 502 or 504 rather than a 500; it is not
 * retried, as the runtime may have acted on it.
 */
async function call(
  ctx: RoutingContext,
  r: Routed,
  route: Route,
  asserted: Parameters<typeof upstreamHeaders>[1],
  gone: ReadonlySet<number>,
): Promise<Attempt> {
  let result: Attempt;
  try {
    result = await send(ctx, r, route, asserted, gone);
  } catch (error) {
    if (!r.signal.aborted && hasCode(error, (code) => code === RUNTIME_STREAMS_FULL)) throw streamsFull(ctx, route);
    // The client left (nobody to answer), or the fault is not the upstream's.
    if (r.signal.aborted || !isUpstreamFailure(error)) throw error;
    if (isTlsFailure(error)) {
      ctx.metrics.upstreamError('tls');
      const err = String((error as Error)?.message);
      ctx.upstreamLog.error(
        new URL(route.url).origin,
        'TLS to the upstream failed: check its certificate and the trusted CAs',
        { err },
      );
      throw new SwitchyardError('upstream_unavailable', 'Bad gateway: TLS to the upstream failed', { cause: error });
    }
    if (hasCode(error, (code) => code === UPSTREAM_SILENT)) {
      // UpstreamChecks logged it, once for all the requests it ended.
      ctx.metrics.upstreamError('silent');
      const upstream = route.direct ? 'the runtime' : 'the scheduler replica carrying this request';
      throw new SwitchyardError('upstream_unavailable', `Bad gateway: ${upstream} stopped answering`, {
        cause: error,
      });
    }
    const timedOut = isHeadersTimeout(error);
    ctx.metrics.upstreamError(timedOut ? 'timeout' : 'reset');
    ctx.logger.warn(
      { runtime: route.runtime, upstream: route.url, err: String((error as Error)?.message) },
      'upstream failed after the request was sent',
    );
    throw timedOut
      ? new SwitchyardError('upstream_timeout', 'Gateway timeout: the runtime sent no answer in time', { cause: error })
      : new SwitchyardError('upstream_unavailable', 'Bad gateway: the runtime closed the connection before answering', {
          cause: error,
        });
  }
  // Only a scheduler proxy refuses so; in direct mode a 503 is the runtime's own.
  if (
    !route.direct &&
    result.kind === 'response' &&
    isStreamsFullAnswer(result.upstream.statusCode, result.upstream.headers)
  ) {
    await result.upstream.discard();
    throw streamsFull(ctx, route);
  }
  // Not the client's credentials, so not the client's 401 (it would start an MCP client's OAuth flow).
  const realm = route.direct ? RUNTIME_DIRECT_REALM : SCHEDULER_API_REALM;
  if (result.kind === 'response' && refusedGatewayToken(result.upstream.statusCode, result.upstream.headers, realm)) {
    await result.upstream.discard();
    ctx.metrics.upstreamError('unauthorized');
    ctx.upstreamLog.error(new URL(route.url).origin, route.direct ? RUNTIME_TOKEN_REFUSED : SCHEDULER_TOKEN_REFUSED);
    const upstream = route.direct ? 'a runtime' : 'a scheduler';
    throw new SwitchyardError('upstream_unavailable', `Bad gateway: ${upstream} refused this gateway's credentials`);
  }
  return result;
}

/**
 * The runtime's tunnel carried as many streams as the runtime takes at once
 * (event streams, requests and relay connections of every gateway): the
 * request was not sent. A new session or an unnamed stateless request is
 * placed elsewhere; a request bound to the runtime is answered 503, to be
 * tried again once some streams have ended.
 */
class StreamsFullError extends SwitchyardError {
  constructor() {
    super(
      'capacity_exhausted',
      'Service unavailable: the runtime carries as many requests and streams as it takes at once; try again shortly',
    );
  }
}

function streamsFull(ctx: RoutingContext, route: Route): StreamsFullError {
  ctx.metrics.upstreamError('streams_full');
  ctx.upstreamLog.warn(
    route.url,
    'runtime carries as many streams as it takes at once: new requests to it get 503 until some end',
    { runtime: route.runtime },
  );
  return new StreamsFullError();
}

/**
 * Places `request`; once a runtime was found full (`full`), no runtime left
 * to place it on is that 503, not "unschedulable": the class has runtimes,
 * busy ones.
 */
async function scheduleUnlessFull(
  ctx: RoutingContext,
  request: ScheduleRequestInput,
  signal: AbortSignal,
  full: StreamsFullError | undefined,
): Promise<Placement> {
  try {
    return await ctx.scheduler.schedule(request, signal);
  } catch (error) {
    if (full && error instanceof SwitchyardError && error.code === 'unschedulable') throw full;
    throw error;
  }
}

/** `call`, or its StreamsFullError when the runtime's tunnel was full (nothing was sent). */
async function callUnlessFull(...args: Parameters<typeof call>): Promise<Attempt | StreamsFullError> {
  try {
    return await call(...args);
  } catch (error) {
    if (error instanceof StreamsFullError) return error;
    throw error;
  }
}

async function send(
  ctx: RoutingContext,
  r: Routed,
  route: Route,
  asserted: Parameters<typeof upstreamHeaders>[1],
  gone: ReadonlySet<number>,
): Promise<Attempt> {
  const method = r.req.method as 'GET' | 'POST' | 'DELETE';
  const headers = upstreamHeaders(r.req.headers, asserted);
  // The client's own Authorization was stripped above; this one is the gateway's.
  const direct = route.direct ? ctx.upstreamAuthorization?.() : undefined;
  if (direct !== undefined) headers.authorization = direct;
  const upstream = {
    url: route.url,
    method,
    headers,
    ...(r.body ? { body: r.body } : {}),
    signal: r.signal,
    idleTimeoutMs: ctx.idleTimeoutMs,
  };
  const via = (dispatcher: Dispatch, call = upstream): Promise<Attempt> =>
    attempt(dispatcher, ctx.clock, call, r.res, gone);
  if (route.direct) return via(ctx.dispatcher);
  // Through a scheduler: event streams as HTTP/2 streams, the rest on relay
  // connections; either, refused before the request left, falls back to
  // plain HTTP/1.1 through `/api/proxy`. The scheduler's API token rides
  // each request it reads; a relay's requests reach the runtime as sent, so
  // the token rides the relay's upgrade instead (RelayConnections).
  const authorization = ctx.schedulerAuthorization?.();
  const proxied = authorization !== undefined ? { ...upstream, headers: { ...headers, authorization } } : upstream;
  if (method === 'GET' && ctx.eventStreams) {
    const streams = ctx.eventStreams;
    const origin = new URL(route.url).origin;
    try {
      return await via(streams.dispatcherFor(origin), proxied);
    } catch (error) {
      if (r.signal.aborted || !streams.fellBack(origin, error)) throw error;
      return via(ctx.dispatcher, proxied);
    }
  }
  const relays = method === 'GET' ? undefined : ctx.relays;
  if (!relays?.covers(route.url)) return via(ctx.dispatcher, proxied);
  try {
    return await via(relays);
  } catch (error) {
    if (r.signal.aborted || !relays.refused(route.url, error)) throw error;
    return via(ctx.dispatcher, proxied);
  }
}

/**
 * `route` goes through a scheduler replica that could not be dialled, so
 * nothing was sent, and its runtime may be alive: a runtime whose replica
 * goes redials another through the scheduler Service, sessions and all.
 * Asks the scheduler again, backing off (20 ms doubling to 1 s) for up to
 * GATEWAY_DEFAULTS.ownerLossWaitMs, until it places `request` on the same
 * runtime through another replica; undefined if it does not by then. No
 * replica answering is thrown (503): that says nothing of the runtime.
 */
async function rerouted(
  ctx: RoutingContext,
  r: Routed,
  route: Route,
  request: ScheduleRequestInput,
): Promise<Route | undefined> {
  const deadline = ctx.clock.now() + GATEWAY_DEFAULTS.ownerLossWaitMs;
  for (let backoffMs: number = GATEWAY_DEFAULTS.scheduleBackoffStartMs; ctx.clock.now() < deadline;) {
    await sleep(ctx.clock, backoffMs, r.signal);
    backoffMs = Math.min(backoffMs * 2, GATEWAY_DEFAULTS.scheduleBackoffMaxMs);
    try {
      const next = routeOf(ctx, await ctx.scheduler.schedule(request, r.signal), route.principal);
      if (next.runtime === route.runtime && next.url !== route.url) {
        ctx.logger.info(
          { runtime: route.runtime, from: route.url, to: next.url },
          'runtime found through another replica',
        );
        return next;
      }
    } catch (error) {
      // No runtime to place it on yet: the session's may still be redialling.
      if (!(error instanceof SwitchyardError && error.code === 'unschedulable')) throw error;
    }
  }
  return undefined;
}

/** What an operator needs to tell a dead runtime from a dead proxy hop: the status, or the dial error. */
function detailOf(result: Exclude<Attempt, { kind: 'response' }>): { status?: number; err?: string } {
  return result.kind === 'gone' ? { status: result.status } : { err: String((result.error as Error)?.message) };
}

function classOf(ctx: RoutingContext, src: IdentitySource): string {
  return resolvePart('class', ctx.chains.class, src) ?? ctx.defaultClass;
}

/**
 * A request of a legacy session (`Mcp-Session-Id` present): route from the
 * cache, else ask the scheduler (its thread fast path knows the session).
 * A lost runtime is a 404 so the client re-initializes; DELETE evicts.
 */
export async function routeSession(ctx: RoutingContext, r: Routed, sessionId: string): Promise<void> {
  const id = r.info?.id ?? null;
  if (!isIdentityValue(sessionId)) throw new SwitchyardError('session_not_found', 'Session not found');
  const src = source(r, sessionId);
  const cls = classOf(ctx, src);
  const process = resolvePart('process', ctx.chains.process, src) ?? sessionId;
  const key = threadKey(sessionId);
  const request = { class: cls, processId: process, threadId: sessionId, sticky: true };
  let route = ctx.cache.local(key) ?? (await ctx.cache.remote(key));
  if (route && route.principal !== r.principal) throw new SwitchyardError('session_not_found', 'Session not found');
  if (!route) {
    route = routeOf(ctx, await ctx.scheduler.schedule(request, r.signal), r.principal);
    await ctx.cache.set(key, route);
  }
  const asserted = { class: cls, process, sessionId, ...(r.principal ? { principal: r.principal } : {}) };
  let result = await call(ctx, r, route, asserted, LEGACY_GONE);
  const moved = result.kind === 'unreachable' && !route.direct ? await rerouted(ctx, r, route, request) : undefined;
  if (moved) {
    ctx.metrics.upstreamError('connect');
    route = moved;
    await ctx.cache.set(key, route);
    result = await call(ctx, r, route, asserted, LEGACY_GONE);
  }
  if (result.kind !== 'response' || r.req.method === 'DELETE') await ctx.cache.delete(key);
  if (result.kind !== 'response') {
    ctx.metrics.upstreamError(result.kind === 'gone' ? 'gone' : 'connect');
    // A 404 is a runtime not knowing the session: it ended or expired there, or the route was
    // scheduled anew after its runtime left (nothing here tells those apart). 502 and no dial: the runtime is gone.
    const unknown = result.kind === 'gone' && result.status === 404;
    ctx.logger.info(
      { runtime: route.runtime, outcome: result.kind, upstream: route.url, ...detailOf(result) },
      unknown ? 'session unknown to the runtime' : 'session lost with its runtime',
    );
    const why = unknown ? 'it ended, expired or lost its runtime' : 'its runtime is gone';
    sendError(r.res, 'session_not_found', `Session not found: ${why}; re-initialize`, id);
    return;
  }
  relay(ctx, r, result.upstream);
}

/**
 * Legacy `initialize` without a session: mint the session id, place it, and
 * forward with `X-Switchyard-Session-Id` so the runtime adopts it. A runtime
 * that cannot be dialled, is gone or is full is excluded and the request
 * rescheduled.
 */
export async function routeInitialize(ctx: RoutingContext, r: Routed): Promise<void> {
  const exclude: string[] = [];
  let full: StreamsFullError | undefined;
  for (let round = 0; round <= GATEWAY_DEFAULTS.rescheduleMax; round++) {
    // A fresh session id per round: the failed runtime may already hold the
    // previous one as a process, and stickiness would pin the retry to it.
    const sessionId = randomId();
    const src = source(r, sessionId);
    const cls = classOf(ctx, src);
    const process = resolvePart('process', ctx.chains.process, src) ?? sessionId;
    const asserted = { class: cls, process, sessionId, ...(r.principal ? { principal: r.principal } : {}) };
    const placement = await scheduleUnlessFull(
      ctx,
      { class: cls, processId: process, threadId: sessionId, sticky: true, ...(exclude.length ? { exclude } : {}) },
      r.signal,
      full,
    );
    const route = routeOf(ctx, placement, r.principal);
    const result = await callUnlessFull(ctx, r, route, asserted, LEGACY_GONE);
    if (result instanceof StreamsFullError) {
      full = result;
      exclude.push(placement.runtime);
      continue;
    }
    if (result.kind === 'response') {
      // Recorded before the client sees the session id, so its next request finds the route.
      if (result.upstream.statusCode < 300) await ctx.cache.set(threadKey(sessionId), route);
      relay(ctx, r, result.upstream);
      return;
    }
    ctx.metrics.upstreamError(result.kind === 'gone' ? 'gone' : 'connect');
    ctx.logger.warn(
      { runtime: placement.runtime, outcome: result.kind, upstream: route.url, ...detailOf(result) },
      'initialize rescheduled',
    );
    exclude.push(placement.runtime);
  }
  throw full ?? new SwitchyardError('upstream_unavailable', 'No runtime could be reached');
}

/**
 * A stateless (2026-07-28) request: placed per request by process identity.
 * Without one the process is the request's own fresh thread, so such
 * requests spread. Named processes are cached; a runtime that cannot be
 * dialled is evicted and the request rescheduled (nothing was sent), as is
 * an unnamed request whose runtime is full (a named process's sandbox is
 * there: it gets 503).
 */
export async function routeStateless(ctx: RoutingContext, r: Routed): Promise<void> {
  const src = source(r);
  const thread = resolvePart('thread', ctx.chains.thread, src) ?? randomId();
  const cls = classOf(ctx, src);
  const named = resolvePart('process', ctx.chains.process, src);
  const process = named ?? thread;
  const key = named ? processKey(cls, named) : undefined;
  const asserted = { class: cls, process, ...(r.principal ? { principal: r.principal } : {}) };
  const request = { class: cls, processId: process, threadId: thread, sticky: true };
  const exclude: string[] = [];
  let found: Route | undefined;
  let full: StreamsFullError | undefined;
  for (let round = 0; round <= GATEWAY_DEFAULTS.rescheduleMax; round++) {
    let route = found ?? (key && round === 0 ? (ctx.cache.local(key) ?? (await ctx.cache.remote(key))) : undefined);
    if (!route) {
      const scheduled = { ...request, ...(exclude.length ? { exclude } : {}) };
      route = routeOf(ctx, await scheduleUnlessFull(ctx, scheduled, r.signal, full));
      if (key) await ctx.cache.set(key, route);
    }
    const result = await callUnlessFull(ctx, r, route, asserted, STATELESS_GONE);
    if (result instanceof StreamsFullError) {
      if (key) throw result;
      full = result;
      exclude.push(route.runtime);
      continue;
    }
    if (result.kind === 'response') {
      relay(ctx, r, result.upstream);
      return;
    }
    if (key) await ctx.cache.delete(key);
    ctx.metrics.upstreamError(result.kind === 'gone' ? 'gone' : 'connect');
    // A 502 may have come after the proxy read the body: a tool call is never sent twice.
    if (result.kind === 'gone' && r.info?.method === 'tools/call') break;
    // A named process behind a replica that cannot be dialled: its sandbox may live on behind another.
    found = key && result.kind === 'unreachable' && !route.direct ? await rerouted(ctx, r, route, request) : undefined;
    if (found) await ctx.cache.set(key!, found);
    else exclude.push(route.runtime);
  }
  throw full ?? new SwitchyardError('upstream_unavailable', 'No runtime could be reached');
}

/** The session header, if any (first value when repeated). */
export function sessionIdOf(req: IncomingMessage): string | undefined {
  const value = req.headers[MCP_SESSION_HEADER];
  return Array.isArray(value) ? value[0] : value;
}
