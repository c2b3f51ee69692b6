import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import { Agent, buildConnector } from 'undici';
import { SwitchyardError, type JsonRpcId } from '@switchyard/protocol';
import { readBody } from '@switchyard/service';
import { addressBlock } from './address-block.ts';
import { createAuthenticator, type Credential } from './auth.ts';
import { InsufficientScopeError, bearerChallenge, refusalOf, type ScopeRefusal } from './challenge.ts';
import { createClassScopes } from './class-scopes.ts';
import { createToolScopes } from './tool-scopes.ts';
import { answerClientError } from './client-error.ts';
import { allowOrigin, answerPreflight, isPreflight } from './cors.ts';
import { parseStrategy } from './identity.ts';
import { ConcurrencyLimiter, headerBytes } from './limits.ts';
import { createMetrics, noMetrics } from './metrics.ts';
import type { GatewayMetrics } from './metrics.ts';
import { EventStreamUpstream } from './event-streams.ts';
import { GATEWAY_DEFAULTS, resolveOptions } from './options.ts';
import type { GatewayOptions } from './options.ts';
import { matchTarget, notFoundMessage } from './request-target.ts';
import type { RequestTarget } from './request-target.ts';
import { RelayConnections } from './relay-connections.ts';
import { createProtectedResource } from './protected-resource.ts';
import { ThrottledLog } from './throttled-log.ts';
import { SCHEDULER_TOKEN, UPSTREAM_TOKEN, tokenHeader } from './token-header.ts';
import { RouteCache } from './route-cache.ts';
import { thrownRefusalReason, tokenRefusalReason } from './refusals.ts';
import { routeInitialize, routeSession, routeStateless, sessionIdOf } from './routing.ts';
import type { Routed, RoutingContext } from './routing-context.ts';
import { UpstreamChecks, checkHealthz } from './upstream-checks.ts';
import { SchedulerClient } from './scheduler-client.ts';
import { StandingStreams } from './standing-streams.ts';
import { isStanding } from './upstream-call.ts';
import type { CloseWatch } from './exchange.ts';
import {
  STATELESS_PROTOCOL_VERSION,
  SUPPORTED_PROTOCOL_VERSIONS,
  UnsupportedVersionError,
  inspectBody,
  sendError,
  sendFailure,
} from './wire.ts';
import type { MessageInfo } from './wire.ts';

/** Counters since start; cheap to read, for probes and tests. */
export interface GatewayStats {
  readonly requests: number;
  readonly inFlight: number;
  readonly sseOpen: number;
  readonly routeCacheEntries: number;
  readonly routeCacheHits: number;
  readonly routeCacheMisses: number;
  readonly schedules: number;
  readonly upstreamErrors: number;
  /** Routes moved to the replica their runtime redialled (see `routes_followed_total`). */
  readonly routesFollowed: number;
}

/**
 * The key a principal's POSTs past its limit are counted under until their
 * bodies show they ask nothing (a space: no principal key has one).
 */
const answersOf = (principal: string): string => `answers ${principal}`;

const tooManyRequests = (): SwitchyardError => new SwitchyardError('too_many_requests', 'Too many concurrent requests');

/** A `node:http` request listener. */
export type GatewayHandler = (req: IncomingMessage, res: ServerResponse) => void;

export interface Gateway {
  /**
   * Serves `/mcp` and `/mcp/:class/:process` (case-insensitive, one trailing
   * slash allowed); any other path is a 404 with a JSON-RPC error body. Pass
   * it to `http.createServer` or call it from your own listener. It reads no
   * framework decorations, so it also runs as a plain express handler.
   */
  readonly app: GatewayHandler;
  /**
   * A `clientError` listener for the server `app` runs on: answers what
   * Node's parser refuses before `app` sees it as answerClientError does,
   * and counts it in `refusals_total`.
   */
  readonly clientError: (error: Error & { code?: unknown }, socket: Duplex) => void;
  /**
   * Ends the standing event streams (sessions' `GET` streams, 2026-07-28
   * `subscriptions/listen`) cleanly and cancels them upstream; requests
   * being answered (tool calls streaming their progress included) go on.
   * A standing stream never ends by itself: a gateway on its way out calls
   * this once its listener stops accepting, so its clients open their
   * streams again (`Last-Event-ID`) on another replica after their
   * reconnection delay (the SDK clients: the stream's `retry`, 1 s from the
   * runtime), instead of keeping this one until its shutdown deadline cuts
   * them. A standing
   * stream still being routed when this is called is ended once its relay
   * starts.
   */
  endEventStreams(): void;
  /** Idempotent: cuts open upstream streams, closes the undici agents and Redis. */
  close(): Promise<void>;
  stats(): GatewayStats;
}

/** What a request holds while it lasts, for its response's close listener. */
interface Held extends CloseWatch {
  /** The concurrency slot taken, until given back. */
  slot?: string;
  /** Cancels routing, until routing is over. */
  abort?: AbortController;
  /** The response closed. */
  gone?: true;
  /** Forgets the request held to its credential (see Authenticator.hold). */
  release?: (() => void) | undefined;
}

function headerValue(req: IncomingMessage, name: string): string | undefined {
  const value = req.headers[name];
  return Array.isArray(value) ? value[0] : value;
}

/**
 * One request as routing reads it. Every field is set, absent ones as
 * undefined (which every reader takes as absent), so that each request's
 * object has one shape, built at once.
 */
function routed(
  req: IncomingMessage,
  res: ServerResponse,
  target: RequestTarget,
  held: Held,
  signal: AbortSignal,
  credential: Credential | undefined,
  body: Buffer | undefined,
  info: MessageInfo | undefined,
): Routed {
  return {
    req,
    res,
    target,
    principal: credential?.principal,
    scopes: credential?.scopes,
    body,
    info,
    signal,
    closeWatch: held,
  };
}

/**
 * Builds the gateway. Throws SwitchyardError('invalid_request') for invalid
 * options (including identity strategies). Guarantees: every error is a
 * JSON-RPC body with the registry's status; `Authorization`, `Cookie` and
 * client `X-Switchyard-*` headers other than class and process never reach a
 * runtime; bodies are bounded. Not guaranteed: exactly-once delivery (a
 * request that reached a runtime and failed is reported, never replayed).
 */
export function createGateway(options: GatewayOptions): Gateway {
  const o = resolveOptions(options);
  const chains = {
    class: o.identity.class.map(parseStrategy),
    process: o.identity.process.map(parseStrategy),
    thread: o.identity.thread.map(parseStrategy),
  };
  const counts = { requests: 0, sseOpen: 0, hits: 0, misses: 0, schedules: 0, upstreamErrors: 0, followed: 0 };
  const exported = o.metrics ? createMetrics(o.metrics.registry, o.metrics.prefix) : noMetrics;
  const metrics: GatewayMetrics = {
    ...exported,
    upstreamError: (reason) => (counts.upstreamErrors++, exported.upstreamError(reason)),
    scheduleLatency: (s, outcome) => (counts.schedules++, exported.scheduleLatency(s, outcome)),
    routeLookup: (result, tier) => {
      if (result === 'hit') counts.hits++;
      else if (tier === 'memory' || o.routeCache.redisUrl) counts.misses++;
      exported.routeLookup(result, tier);
    },
    sseOpened: () => (counts.sseOpen++, exported.sseOpened()),
    sseClosed: () => (counts.sseOpen--, exported.sseClosed()),
    routeFollowed: () => (counts.followed++, exported.routeFollowed()),
  };
  const keepAliveMs = Math.min(o.idleTimeoutMs, GATEWAY_DEFAULTS.upstreamKeepAliveMs);
  const agentOptions = {
    keepAliveTimeout: keepAliveMs,
    keepAliveMaxTimeout: keepAliveMs,
    connectTimeout: GATEWAY_DEFAULTS.connectTimeoutMs,
    // HTTP/1.1 even where TLS would negotiate h2 (undici offers it by
    // default): a TLS front that passes bytes through (a load balancer ending
    // TLS) would hand a scheduler HTTP/2, which it serves only for event
    // streams. Those have their own client (EventStreamUpstream).
    allowH2: false,
  };
  const schedulerAgent = new Agent(agentOptions);
  const checks =
    o.upstreamCheckIntervalMs > 0
      ? new UpstreamChecks({
          intervalMs: o.upstreamCheckIntervalMs,
          clock: o.clock,
          check: checkHealthz,
          logger: o.logger,
        })
      : undefined;
  const upstreamAgent = checks
    ? new Agent({
        ...agentOptions,
        connect: checks.watching(buildConnector({ timeout: agentOptions.connectTimeout, allowH2: false })),
      })
    : new Agent(agentOptions);
  const eventStreams = o.eventStreamsOverHttp2
    ? new EventStreamUpstream({
        http1: upstreamAgent,
        streamsPerConnection: GATEWAY_DEFAULTS.eventStreamsPerConnection,
        connectTimeoutMs: agentOptions.connectTimeout,
        idleTimeoutMs: Math.min(o.idleTimeoutMs, GATEWAY_DEFAULTS.http2IdleMs),
        pingIntervalMs: o.eventStreamPingIntervalMs,
        clock: o.clock,
        logger: o.logger,
      })
    : undefined;
  // Asked per request and per new connection, so a rotated token is presented without a restart.
  const schedulerAuthorization = o.schedulerToken
    ? tokenHeader(SCHEDULER_TOKEN, o.schedulerToken, o.logger)
    : undefined;
  const upstreamAuthorization = o.upstreamToken ? tokenHeader(UPSTREAM_TOKEN, o.upstreamToken, o.logger) : undefined;
  const upstreamLog = new ThrottledLog(o.logger, o.clock);
  const relays = o.relayConnections
    ? new RelayConnections({
        ...agentOptions,
        clock: o.clock,
        ...(checks ? { checks } : {}),
        ...(schedulerAuthorization ? { authorization: schedulerAuthorization } : {}),
        onRefused: (relay, error) => {
          metrics.relayRefused();
          o.logger.info(
            { relay, err: error.message },
            'relay refused; that runtime is reached through /api/proxy for 30 s',
          );
        },
        onLimit: () => metrics.relayLimitReached(),
      })
    : undefined;
  const cache = new RouteCache({
    maxEntries: o.routeCache.maxEntries,
    ttlMs: o.routeCache.ttlMs,
    ...(o.routeCache.redisUrl ? { redisUrl: o.routeCache.redisUrl } : {}),
    redisKeyPrefix: o.routeCache.redisKeyPrefix,
    upstreamLog,
    onLookup: (result, tier) => metrics.routeLookup(result, tier),
    onRedisFailure: (op) => metrics.routeCacheRedisFailed(op),
  });
  const scheduler = new SchedulerClient({
    schedulers: o.schedulers,
    dispatcher: schedulerAgent,
    ...(schedulerAuthorization ? { authorization: schedulerAuthorization } : {}),
    upstreamLog,
    clock: o.clock,
    timeoutMs: GATEWAY_DEFAULTS.connectTimeoutMs,
    onLatency: (s, outcome) => metrics.scheduleLatency(s, outcome),
    onHedge: () => metrics.scheduleHedged(),
  });
  const classScopes = createClassScopes(o.auth);
  const toolScopes = createToolScopes(o.auth);
  const ctx: RoutingContext = {
    dispatcher: upstreamAgent,
    ...(eventStreams ? { eventStreams } : {}),
    ...(relays ? { relays } : {}),
    scheduler,
    cache,
    standing: new StandingStreams(),
    following: new Set(),
    clock: o.clock,
    logger: o.logger,
    metrics,
    upstreamMode: o.upstreamMode,
    ...(upstreamAuthorization ? { upstreamAuthorization } : {}),
    ...(schedulerAuthorization ? { schedulerAuthorization } : {}),
    upstreamLog,
    idleTimeoutMs: o.idleTimeoutMs,
    chains,
    defaultClass: options.defaultClass ?? GATEWAY_DEFAULTS.defaultClass,
    ...(classScopes ? { classScopes } : {}),
    ...(toolScopes ? { toolScopes } : {}),
  };
  const authenticator = createAuthenticator(o.auth, o.clock, upstreamLog, (ended) =>
    o.logger.warn({ ended }, 'closed requests whose token was removed'),
  );
  const protectedResource = createProtectedResource(o.auth);
  const limiter = new ConcurrencyLimiter(o.principalConcurrencyMax, GATEWAY_DEFAULTS.principalsTrackedMax);
  let closed = false;
  let closing: Promise<void> | undefined;

  async function handle(req: IncomingMessage, res: ServerResponse, target: RequestTarget): Promise<void> {
    counts.requests++;
    // Filled in as the request passes the gates; read by the close listener.
    const held: Held = { relay: undefined };
    // One listener for the response's end: count it when it finished, and
    // otherwise the client went away, which cancels upstream at once; the
    // relay hears of it from here (CloseWatch). (`on`: a response closes
    // once, and `once` would wrap it in one more closure.)
    res.on('close', () => {
      held.gone = true;
      // Given back once: routing may still end normally after this (routingDone).
      if (held.slot !== undefined) limiter.release(held.slot);
      held.slot = undefined;
      if (res.writableFinished) metrics.request(req.method ?? 'OTHER', res.statusCode);
      else held.abort?.abort(new Error('client disconnected'));
      held.relay?.clientClosed();
      held.release?.();
    });
    // Refusals answered here, or thrown with a code others share, are counted here; thrown ones in fail().
    if (closed) {
      metrics.refused('shutting_down');
      throw new SwitchyardError('not_ready', 'Gateway is shutting down');
    }
    if (headerBytes(req) > o.headerBytesMax) {
      metrics.refused('header_too_large');
      sendError(res, 'header_too_large', 'Request headers too large', null, {});
      return;
    }
    const origin = headerValue(req, 'origin');
    if (origin !== undefined) {
      if (!o.allowedOrigins.allows(origin)) {
        metrics.refused('origin');
        throw new SwitchyardError('forbidden', 'Origin not allowed');
      }
      if (isPreflight(req)) return answerPreflight(req, res, origin);
      allowOrigin(res, origin);
    }
    if (req.method !== 'POST' && req.method !== 'GET' && req.method !== 'DELETE') {
      metrics.refused('method_not_allowed');
      sendError(res, 'method_not_allowed', 'Method not allowed', null, { Allow: 'GET, POST, DELETE' });
      return;
    }
    const version = headerValue(req, 'mcp-protocol-version');
    if (version !== undefined && !SUPPORTED_PROTOCOL_VERSIONS.has(version)) {
      throw new UnsupportedVersionError('Unsupported MCP-Protocol-Version', version);
    }
    let credential: Credential | undefined;
    try {
      if (authenticator) credential = await authenticator.authenticate(headerValue(req, 'authorization'));
    } catch (error) {
      // 401: no token, or one that is no good; 403: a good one short of a required scope.
      if (error instanceof SwitchyardError && (error.code === 'unauthorized' || error.code === 'forbidden')) {
        return refuse(req, res, error, null, 'insufficient_scope');
      }
      // The JWKS cannot be fetched (jwks.ts): a 503 whatever the token.
      if (error instanceof SwitchyardError && error.code === 'not_ready') metrics.refused('jwks_unavailable');
      throw error;
    }
    const principal = credential?.principal;
    const slot = principal ?? `ip:${addressBlock(o.trustedProxies.clientOf(req), o.clientIpv6PrefixLength)}`;
    const taken = takeSlot(slot, req.method !== 'GET');
    // The client left while authentication ran: give the slot back, send nothing.
    if (held.gone) return limiter.release(taken);
    held.slot = taken;
    // What a credential let in ends with it (a token removed, a JWT expired).
    if (credential) held.release = authenticator!.hold(credential, () => endAdmitted(held, res));
    const abort = (held.abort = new AbortController());
    const sessionId = sessionIdOf(req);
    if (req.method !== 'POST') {
      if (sessionId === undefined) {
        // A 2026-07-28 client, or a legacy one that skipped initialize: say what the method needs.
        const needs = `${req.method} /mcp needs the Mcp-Session-Id of a session that initialize opened`;
        throw new SwitchyardError('method_not_allowed', `${needs}; without one, only POST is served`);
      }
      const r = routed(req, res, target, held, abort.signal, credential, undefined, undefined);
      await routeSession(ctx, r, sessionId);
      return routingDone(held, isStanding(r));
    }
    // Held, bounded: routing needs the JSON-RPC method and id, and a rescheduled
    // `initialize` must be resent. Response bodies stream.
    // No abort signal: a client that goes away closes the request, which ends the read.
    // A deadline: the slot is held while the body arrives, and a client may trickle it for ever.
    const body = await readBody(req, { bytesMax: o.bodyBytesMax, timeoutMs: o.bodyTimeoutMs });
    const info = inspectBody(body, toolScopes !== undefined);
    const r = routed(req, res, target, held, abort.signal, credential, body, info);
    try {
      if (taken !== slot && info.asks) throw tooManyRequests();
      if (info.claimedVersion !== undefined && !SUPPORTED_PROTOCOL_VERSIONS.has(info.claimedVersion)) {
        throw new UnsupportedVersionError('Unsupported protocol version', info.claimedVersion);
      }
      if (version === STATELESS_PROTOCOL_VERSION || info.claimedVersion === STATELESS_PROTOCOL_VERSION) {
        await routeStateless(ctx, r);
      } else if (sessionId !== undefined) {
        await routeSession(ctx, r, sessionId);
      } else if (info.isInitialize) {
        await routeInitialize(ctx, r);
      } else {
        throw new SwitchyardError('session_required', 'Bad Request: Mcp-Session-Id header is required');
      }
    } catch (error) {
      (error as { rpcId?: unknown }).rpcId = info.id;
      throw error;
    }
    routingDone(held, isStanding(r));
  }

  /**
   * Takes one of `principal`'s slots, or throws 429. A POST or DELETE past
   * the limit takes one of as many kept for its answers (`answersOf`)
   * instead; a POST keeps it only if its body asks nothing (handle checks
   * `info.asks`): a client's answer to a sampling or elicitation request, or
   * its `notifications/cancelled`, concerns calls that may hold every one of
   * the principal's slots, which would otherwise wait for it until they
   * time out, uncancellable. A DELETE has no body and ends a session, which
   * frees what the session holds. A GET opens a stream: refused.
   */
  function takeSlot(principal: string, answers: boolean): string {
    if (limiter.acquire(principal)) return principal;
    if (answers && limiter.acquire(answersOf(principal))) return answersOf(principal);
    throw tooManyRequests();
  }

  /**
   * Ends a request whose credential ended, cancelling its upstream request
   * either way. An event stream being relayed ends whole, so its client
   * sees it end rather than break (and opens it again with the token it
   * holds now, refused if that one is no good either); one whose client
   * is not reading it is cut, or its socket would stay open until it read.
   * Anything else is cut, as its client going would: a request still being
   * routed, or a JSON answer, which would look whole if ended part way.
   */
  function endAdmitted(held: Held, res: ServerResponse): void {
    if (res.writableNeedDrain || !held.relay?.endEventStream()) res.destroy();
  }

  /**
   * Routing is over (the answer is being relayed, or was sent): the relay
   * cancels its upstream request itself when the client goes, so a stream
   * left open (a GET stream, a long tool call) need not hold the request's
   * controller.
   *
   * A standing stream (a session's GET stream, a 2026-07-28
   * `subscriptions/listen`) also gives back its concurrency slot here. It
   * stays open, mostly idle, for as long as its session or client lives, one
   * per session at most; counted, it would cap how many sessions a principal
   * holds (every MCP SDK client opens one per session), while the limit is on
   * requests being worked on. It counts while it is being routed. (Its
   * relay lists it for endEventStreams: see StandingStreams.)
   */
  function routingDone(held: Held, standing: boolean): void {
    held.abort = undefined;
    if (!standing || held.slot === undefined) return;
    limiter.release(held.slot);
    held.slot = undefined;
  }

  /**
   * Answers a request its token does not admit, with the challenge that says
   * why (RFC 6750 §3); a token short of scopes is counted as `scope`.
   */
  function refuse(
    req: IncomingMessage,
    res: ServerResponse,
    error: SwitchyardError,
    id: JsonRpcId,
    scope: ScopeRefusal,
  ): void {
    const refusal = refusalOf(error, headerValue(req, 'authorization'), o.auth.requiredScopes);
    metrics.refused(tokenRefusalReason(error, refusal, scope));
    sendError(res, error.code, error.message, id, {
      'WWW-Authenticate': protectedResource?.challenge(req, refusal) ?? bearerChallenge(refusal, o.auth.requiredScopes),
    });
  }

  function fail(req: IncomingMessage, res: ServerResponse, error: unknown): void {
    const id = ((error as { rpcId?: unknown } | null)?.rpcId ?? null) as JsonRpcId;
    // A token short of the scopes of the class that would serve the request (ClassScopes), or of a tool it calls (ToolScopes).
    if (error instanceof InsufficientScopeError) return refuse(req, res, error, id, error.reason);
    const refused = thrownRefusalReason(error);
    if (refused !== undefined) metrics.refused(refused);
    if (!(error instanceof SwitchyardError) && res.writableEnded === false && !req.destroyed) {
      const path = (req.url ?? '').split('?', 1)[0];
      o.logger.error({ err: (error as Error)?.message, path }, 'gateway request failed');
    }
    sendFailure(res, error, id);
  }

  // A plain listener rather than a router: matching two fixed routes by hand
  // saves the framework's per-request work, which profiling put on a par
  // with the gateway's own.
  const app: GatewayHandler = (req, res) => {
    if (protectedResource?.handle(req, res)) return;
    let target: RequestTarget | undefined;
    try {
      target = matchTarget(req.url);
    } catch (error) {
      fail(req, res, error);
      return;
    }
    if (!target) {
      sendError(res, 'not_found', notFoundMessage(req.url));
      return;
    }
    handle(req, res, target).catch((error: unknown) => fail(req, res, error));
  };

  return {
    app,
    clientError: (error, socket) => {
      const refused = answerClientError(error, socket);
      if (refused !== undefined) metrics.refused(refused);
    },
    stats: () => ({
      requests: counts.requests,
      inFlight: limiter.inFlight,
      sseOpen: counts.sseOpen,
      routeCacheEntries: cache.size,
      routeCacheHits: counts.hits,
      routeCacheMisses: counts.misses,
      schedules: counts.schedules,
      upstreamErrors: counts.upstreamErrors,
      routesFollowed: counts.followed,
    }),
    endEventStreams() {
      ctx.standing.endAll();
    },
    close() {
      closed = true;
      closing ??= Promise.allSettled([
        upstreamAgent.destroy(),
        schedulerAgent.destroy(),
        eventStreams?.close(),
        relays?.close(),
        checks?.close(),
        cache.close(),
        authenticator?.close(),
      ]).then(() => undefined);
      return closing;
    },
  };
}
