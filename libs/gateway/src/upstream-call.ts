// One request to a route's runtime, and what became of it: sent on the
// right upstream (direct, relay, HTTP/2 event stream, /api/proxy), its
// failures turned into the client's answer, its response relayed.
import {
  FORWARDED_HEADER_BYTES_MAX,
  RUNTIME_DIRECT_REALM,
  SCHEDULER_API_REALM,
  SwitchyardError,
} from '@switchyard/protocol';
import { attempt } from './forward.ts';
import type { Attempt } from './forward.ts';
import { isUpstreamFailure } from './exchange.ts';
import type { RelayEnd, UpstreamCall, UpstreamResponse } from './exchange.ts';
import type { Dispatch } from './http2-streams.ts';
import type { Route } from './route-cache.ts';
import type { Routed, RoutingContext } from './routing-context.ts';
import { UPSTREAM_SILENT } from './upstream-checks.ts';
import {
  RUNTIME_TOKEN_REFUSED,
  SCHEDULER_TOKEN_REFUSED,
  isEventStream,
  forwardedHeaderBytes,
  hasCode,
  isHeadersTimeout,
  isStreamsFullAnswer,
  isTlsFailure,
  refusedGatewayToken,
  upstreamHeaders,
} from './upstream.ts';
import type { AssertedHeaders } from './upstream.ts';

/**
 * Starts relaying and returns at once: the request's async frames (and all
 * they hold) end here instead of living as long as the stream, which for an
 * open GET stream is most of what it costs. Its end is reported to one
 * callback per routing context (relayEndOf), so an open stream holds neither
 * a promise nor a closure of its own for it.
 */
export function relay(ctx: RoutingContext, r: Routed, upstream: UpstreamResponse): void {
  if (isEventStream(upstream.headers)) ctx.metrics.sseOpened();
  upstream.relay(r.res, ctx.idleTimeoutMs, relayEndOf(ctx), isStanding(r) ? ctx.standing : undefined);
}

/**
 * A session's GET stream or a 2026-07-28 `subscriptions/listen`: open for as
 * long as its session or client lives, and ended by Gateway.endEventStreams.
 */
export function isStanding(r: Routed): boolean {
  return r.req.method === 'GET' || r.info?.method === 'subscriptions/listen';
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
export async function call(
  ctx: RoutingContext,
  r: Routed,
  route: Route,
  asserted: AssertedHeaders,
  gone: ReadonlySet<number>,
): Promise<Attempt> {
  let result: Attempt;
  try {
    result = await send(ctx, r, route, asserted, gone);
  } catch (error) {
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
    // Once per runtime and interval: one that resets or stalls every request fails them all alike.
    ctx.upstreamLog.warn(route.url, 'upstream failed after the request was sent', {
      runtime: route.runtime,
      err: String((error as Error)?.message),
    });
    throw timedOut
      ? new SwitchyardError('upstream_timeout', 'Gateway timeout: the runtime sent no answer in time', { cause: error })
      : new SwitchyardError('upstream_unavailable', 'Bad gateway: the runtime closed the connection before answering', {
          cause: error,
        });
  }
  // Only a scheduler proxy refuses so; in direct mode, and on a relay connection (refused, if at all, at its
  // upgrade), a 503 is the runtime's own.
  if (
    !route.direct &&
    result.kind === 'response' &&
    !result.relayed &&
    isStreamsFullAnswer(result.upstream.statusCode, result.upstream.headers)
  ) {
    await result.upstream.discard();
    throw streamsFull(ctx, route);
  }
  // Not the client's credentials, so not the client's 401 (it would start an MCP client's OAuth flow). On a
  // relay connection the scheduler refuses the token at the upgrade: a 401 after it is the runtime's own.
  const realm = route.direct ? RUNTIME_DIRECT_REALM : SCHEDULER_API_REALM;
  if (
    result.kind === 'response' &&
    !result.relayed &&
    refusedGatewayToken(result.upstream.statusCode, result.upstream.headers, realm)
  ) {
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
export class StreamsFullError extends SwitchyardError {
  constructor() {
    super(
      'capacity_exhausted',
      'Service unavailable: the runtime carries as many requests and streams as it takes at once; try again shortly',
    );
  }
}

function streamsFull(ctx: RoutingContext, route: Route): StreamsFullError {
  // Each of this gateway's relays to the runtime holds one of those streams, idle or not.
  ctx.relays?.shed(route.url);
  ctx.metrics.upstreamError('streams_full');
  ctx.upstreamLog.warn(
    route.url,
    'runtime carries as many streams as it takes at once: new requests to it get 503 until some end',
    { runtime: route.runtime },
  );
  return new StreamsFullError();
}

/** `call`, or its StreamsFullError when the runtime's tunnel was full (nothing was sent). */
export async function callUnlessFull(...args: Parameters<typeof call>): Promise<Attempt | StreamsFullError> {
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
  asserted: AssertedHeaders,
  gone: ReadonlySet<number>,
): Promise<Attempt> {
  const method = r.req.method as 'GET' | 'POST' | 'DELETE';
  const headers = upstreamHeaders(r.req.headers, asserted);
  // The client's own Authorization was stripped above; this one is the gateway's.
  const direct = route.direct ? ctx.upstreamAuthorization?.() : undefined;
  if (direct !== undefined) headers.authorization = direct;
  // Absent parts as undefined, which exchange takes as absent: one shape for every request.
  const upstream: UpstreamCall = {
    url: route.url,
    method,
    headers,
    body: r.body,
    signal: r.signal,
    idleTimeoutMs: ctx.idleTimeoutMs,
    closeWatch: r.closeWatch,
  };
  if (route.direct) {
    refuseOversizedHeaders(method, route.url, headers);
    return attempt(ctx.dispatcher, ctx.clock, upstream, r.res, gone);
  }
  const via = (dispatcher: Dispatch, call = upstream): Promise<Attempt> =>
    attempt(dispatcher, ctx.clock, call, r.res, gone);
  // Through a scheduler: event streams as HTTP/2 streams, the rest on relay
  // connections; either, refused before the request left, falls back to
  // plain HTTP/1.1 through `/api/proxy`. The scheduler's API token rides
  // each request it reads; a relay's requests reach the runtime as sent, so
  // the token rides the relay's upgrade instead (RelayConnections).
  const authorization = ctx.schedulerAuthorization?.();
  const proxied = authorization !== undefined ? { ...upstream, headers: { ...headers, authorization } } : upstream;
  refuseOversizedHeaders(method, route.url, proxied.headers);
  if (method === 'GET' && ctx.eventStreams) {
    const streams = ctx.eventStreams;
    const origin = new URL(route.url).origin;
    let result: Attempt;
    try {
      result = await via(streams.dispatcherFor(origin), proxied);
    } catch (error) {
      if (r.signal.aborted || !streams.fellBack(origin, error)) throw error;
      return via(ctx.dispatcher, proxied);
    }
    // Over HTTP/2 a replica reaches only the tunnels it holds; over HTTP/1.1 it forwards to
    // the replica a runtime moved to (its redial after a restart or a broken connection).
    return result.kind === 'gone' && result.notConnected ? via(ctx.dispatcher, proxied) : result;
  }
  const relays = method === 'GET' ? undefined : ctx.relays;
  if (!relays?.covers(route.url)) return via(ctx.dispatcher, proxied);
  try {
    const result = await via(relays);
    return result.kind === 'response' ? { ...result, relayed: true } : result;
  } catch (error) {
    if (r.signal.aborted || !relays.refused(route.url, error)) throw error;
    return via(ctx.dispatcher, proxied);
  }
}

/**
 * Headers the gateway took under its own headerBytesMax (credentials it
 * strips may make most of them) can still be more than it may forward: the
 * client gets the gateway's 431, as for its own limit, not a hop's bare one
 * taken for an upstream failure. Nothing was sent.
 */
function refuseOversizedHeaders(method: string, url: string, headers: Readonly<Record<string, string>>): void {
  if (forwardedHeaderBytes(method, url, headers) > FORWARDED_HEADER_BYTES_MAX) {
    throw new SwitchyardError('header_too_large', 'Request headers too large');
  }
}

/** What an operator needs to tell a dead runtime from a dead proxy hop: the status, or the dial error. */
export function detailOf(result: Exclude<Attempt, { kind: 'response' }>): { status?: number; err?: string } {
  return result.kind === 'gone' ? { status: result.status } : { err: String((result.error as Error)?.message) };
}
