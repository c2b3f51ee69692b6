// Where each kind of request goes: a legacy session's to its runtime (404
// once that is gone), an initialize to a newly placed runtime (rescheduled
// past runtimes that fail or are full), a stateless request by its process.
// Sending it and answering for the upstream is upstream-call.ts's part.
import type { IncomingMessage } from 'node:http';
import { MCP_SESSION_HEADER, SwitchyardError, isIdentityValue } from '@switchyard/protocol';
import type { ScheduleRequestInput } from '@switchyard/protocol';
import { sleep } from '@switchyard/clock';
import type { Attempt } from './forward.ts';
import { describe, randomId, resolvePart } from './identity.ts';
import type { IdentitySource } from './identity.ts';
import { GATEWAY_DEFAULTS } from './options.ts';
import { parseSearch } from './request-target.ts';
import type { Route } from './route-cache.ts';
import type { Routed, RoutingContext } from './routing-context.ts';
import { UnschedulableError } from './scheduler-client.ts';
import type { Placement } from './scheduler-client.ts';
import { StreamsFullError, call, callUnlessFull, detailOf, relay } from './upstream-call.ts';
import { wasForwarded } from './upstream.ts';
import { sendError } from './wire.ts';

const LEGACY_GONE = new Set([404, 502]);
const STATELESS_GONE = new Set([502]);
const threadKey = (thread: string): string => `thread:${thread}`;
const processKey = (cls: string, process: string): string => `process:${cls}/${process}`;
const isUnschedulable = (error: unknown): boolean => error instanceof SwitchyardError && error.code === 'unschedulable';

/**
 * What the identity strategies read from one request. A class rather than
 * an object literal: a literal with a getter and spread-in parts is built
 * in V8's slow dictionary mode, on every request.
 */
class RequestSource implements IdentitySource {
  readonly headers: IdentitySource['headers'];
  readonly params: IdentitySource['params'];
  readonly sessionId: string | undefined;
  readonly principal: string | undefined;
  readonly #search: string;
  #query: Readonly<Record<string, unknown>> | undefined;

  constructor(r: Routed, sessionId: string | undefined) {
    this.headers = r.req.headers;
    this.params = r.target.params;
    this.sessionId = sessionId;
    this.principal = r.principal;
    this.#search = r.target.search;
  }

  /** Parsed on first use: the default strategies never read the query. */
  get query(): Readonly<Record<string, unknown>> {
    return (this.#query ??= parseSearch(this.#search));
  }
}

const source = (r: Routed, sessionId?: string): IdentitySource => new RequestSource(r, sessionId);

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
 * The scheduler's "no runtime serves class X" for a request that named no
 * class: its client cannot tell that X is the gateway's `defaultClass` (a
 * gateway and a runtime each started with their own defaults disagree:
 * `default` and `demo`), so the answer says so and where a request names
 * its class. Any other failure is returned as it is.
 */
function withClassSource(ctx: RoutingContext, src: IdentitySource, error: unknown): unknown {
  if (!(error instanceof UnschedulableError) || error.reason !== 'no_runtime_for_class') return error;
  const sources = ctx.chains.class.filter((s) => s.kind !== 'default');
  if (resolvePart('class', sources, src) !== undefined) return error;
  const where = sources.length > 0 ? ` (${sources.map(describe).join(', ')})` : '';
  const message = `${error.message}; the request named no class${where}, so it got the gateway's defaultClass`;
  return new UnschedulableError(message, error.reason);
}

/**
 * Places `request`; once a runtime was found full or refused the request
 * itself (`instead`), no runtime left to place it on is that (a 503 for
 * busy runtimes, or what a runtime said), not "unschedulable": the class
 * has runtimes, and the scheduler's reason would name only the ones this
 * gateway excluded, of which the client knows nothing. Runtimes that could
 * not be reached stay "unschedulable", retried after a second.
 */
async function scheduleUnlessFull(
  ctx: RoutingContext,
  src: IdentitySource,
  request: ScheduleRequestInput,
  signal: AbortSignal,
  instead: SwitchyardError | undefined,
): Promise<Placement> {
  try {
    return await ctx.scheduler.schedule(request, signal);
  } catch (error) {
    if (instead && isUnschedulable(error)) throw instead;
    throw withClassSource(ctx, src, error);
  }
}

/**
 * The client's answer for a request no runtime took, when a runtime answered it with its own error (its
 * sandbox could not start): that error, as a 502. Undefined for a runtime that is gone or unreachable.
 */
function refusalOf(result: Exclude<Attempt, { kind: 'response' }>): SwitchyardError | undefined {
  const said = result.kind === 'gone' ? result.said : undefined;
  return said ? new SwitchyardError('upstream_unavailable', `Bad gateway: ${said}`) : undefined;
}

/**
 * Asks the scheduler to place `request` again, backing off (20 ms doubling
 * to 1 s) for up to GATEWAY_DEFAULTS.ownerLossWaitMs, until `wanted` takes
 * its route; undefined if none does by then. An `unschedulable` answer is
 * asked again too: the runtime looked for may still be redialling. No
 * replica answering is thrown (503): that says nothing of the runtime.
 */
async function placedWithin(
  ctx: RoutingContext,
  r: Routed,
  request: ScheduleRequestInput,
  principal: string | undefined,
  wanted: (route: Route) => boolean,
): Promise<Route | undefined> {
  const deadline = ctx.clock.monotonicNow() + GATEWAY_DEFAULTS.ownerLossWaitMs;
  for (let backoffMs: number = GATEWAY_DEFAULTS.scheduleBackoffStartMs; ctx.clock.monotonicNow() < deadline;) {
    await sleep(ctx.clock, backoffMs, r.signal);
    backoffMs = Math.min(backoffMs * 2, GATEWAY_DEFAULTS.scheduleBackoffMaxMs);
    try {
      const next = routeOf(ctx, await ctx.scheduler.schedule(request, r.signal), principal);
      if (wanted(next)) return next;
    } catch (error) {
      if (!isUnschedulable(error)) throw error;
    }
  }
  return undefined;
}

/**
 * `route` goes through a scheduler replica that could not be dialled, so
 * nothing was sent, and its runtime may be alive: a runtime whose replica
 * goes redials another through the scheduler Service, sessions and all.
 * Waits (placedWithin) until the scheduler places `request` on the same
 * runtime through another replica; undefined if it does not by then.
 */
async function rerouted(
  ctx: RoutingContext,
  r: Routed,
  route: Route,
  request: ScheduleRequestInput,
): Promise<Route | undefined> {
  const next = await placedWithin(
    ctx,
    r,
    request,
    route.principal,
    (found) => found.runtime === route.runtime && found.url !== route.url,
  );
  if (next) {
    // Once per lost replica and interval: each session and named process that was routed through it follows its
    // runtime on its next request, and a replica may have carried thousands.
    ctx.upstreamLog.info(new URL(route.url).origin, 'runtime found through another replica', {
      runtime: route.runtime,
      from: route.url,
      to: next.url,
    });
  }
  return next;
}

/**
 * Where a session with no cached route goes: the scheduler's answer (its
 * thread fast path knows the session). Unschedulable, the session is on no
 * runtime the fleet shows as reachable: its runtime is gone and none other
 * can take work, or it is redialling, or the session was opened a moment
 * ago through another gateway replica and no epoch shows it yet. Waits
 * (placedWithin) for the latter two; undefined, the session is lost.
 */
async function placedSession(
  ctx: RoutingContext,
  r: Routed,
  request: ScheduleRequestInput,
): Promise<Route | undefined> {
  try {
    return routeOf(ctx, await ctx.scheduler.schedule(request, r.signal), r.principal);
  } catch (error) {
    if (!isUnschedulable(error)) throw error;
  }
  return await placedWithin(ctx, r, request, r.principal, () => true);
}

/**
 * The replica `route` names forwarded the request to the one that holds its
 * runtime's tunnel now (the runtime redialled there after a restart or a
 * broken connection), as it would each later request on the route: one hop
 * more for as long as the session lasts. Asks the scheduler where the
 * runtime is reached now, in the background and one ask per key at once, and
 * caches that in place of `route`. Where to go is always the scheduler's
 * answer, never the forwarded answer's.
 */
function followRuntime(ctx: RoutingContext, key: string, route: Route, request: ScheduleRequestInput): void {
  const { following } = ctx;
  if (following.has(key)) return;
  following.add(key);
  void (async () => {
    try {
      const next = routeOf(ctx, await ctx.scheduler.schedule(request), route.principal);
      // Another runtime would be a new placement: the session's runtime is where its state is.
      if (next.runtime !== route.runtime || next.url === route.url) return;
      if (!(await ctx.cache.replace(key, route, next))) return;
      ctx.metrics.routeFollowed();
      ctx.logger.debug({ runtime: route.runtime, from: route.url, to: next.url }, 'route follows its runtime');
    } catch (error) {
      // The route still works, through the forwarding replica; the next forwarded answer asks again.
      ctx.logger.debug({ runtime: route.runtime, err: String((error as Error)?.message) }, 'route not followed');
    } finally {
      following.delete(key);
    }
  })();
}

/**
 * Holds a request to the scopes of the class serving it (`cls`, when one is
 * listed) and of the tools it calls, before anything is scheduled or sent.
 * Either refusal names every scope the request needs (RFC 6750 §3.1), so one
 * step-up admits it: a client that asks for just what the last challenge
 * named would otherwise trade the class's scopes for the tool's and back.
 */
function admitScopes(ctx: RoutingContext, r: Routed, cls: string | undefined): void {
  // A gateway holding nothing to scopes spends nothing here.
  if (!ctx.classScopes && !ctx.toolScopes) return;
  const tools = r.info?.toolNames ?? [];
  const classNeeds = cls === undefined ? [] : (ctx.classScopes?.needs(cls) ?? []);
  ctx.toolScopes?.admit(tools, r.scopes, classNeeds);
  if (cls !== undefined) ctx.classScopes?.admit(cls, r.scopes, ctx.toolScopes?.needs(tools));
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
  // The session's class, not the one this request names: a runtime keeps a session on the sandbox it opened.
  const sessionClass = ctx.classScopes?.sessionClass(sessionId);
  admitScopes(ctx, r, sessionClass);
  const src = source(r, sessionId);
  // Known for a class held to scopes (its id says it), and then what the scheduler and runtime are told.
  const cls = sessionClass ?? classOf(ctx, src);
  const named = resolvePart('process', ctx.chains.process, src);
  const process = named ?? sessionId;
  const key = threadKey(sessionId);
  const request = { class: cls, processId: process, threadId: sessionId, sticky: true };
  const cached = ctx.cache.local(key) ?? (await ctx.cache.remote(key));
  if (cached && cached.principal !== r.principal) throw new SwitchyardError('session_not_found', 'Session not found');
  // A route not cached is cached once its runtime took the request: the runtime knows
  // the session's principal, this gateway no longer does, and must not learn a wrong one.
  const placed = cached ?? (await placedSession(ctx, r, request));
  if (!placed) {
    // A 503 would have the client wait for a session no runtime holds: 404, and it re-initializes.
    // Debug: any client may name any session and class, as often as it likes.
    ctx.logger.debug({ class: cls }, 'session lost: no runtime holds it, none can take it');
    sendError(r.res, 'session_not_found', 'Session not found: no runtime holds it; re-initialize', id);
    return;
  }
  let route = placed;
  const asserted = { class: cls, process: named, sessionId, ...(r.principal ? { principal: r.principal } : {}) };
  let result: Attempt;
  try {
    result = await call(ctx, r, route, asserted, LEGACY_GONE);
    const moved = result.kind === 'unreachable' && !route.direct ? await rerouted(ctx, r, route, request) : undefined;
    if (moved) {
      ctx.metrics.upstreamError('connect');
      route = moved;
      result = await call(ctx, r, route, asserted, LEGACY_GONE);
    }
  } catch (error) {
    // A DELETE that failed once sent (the runtime cut it or reset its stream) may have ended the session
    // there, or half, and the client takes it for ended: its next request with the id is placed by the
    // scheduler, which knows what the runtime still holds, not sent from the cache to a half-ended
    // session. A route dropped that was still good costs one schedule.
    if (r.req.method === 'DELETE') await ctx.cache.delete(key);
    throw error;
  }
  if (result.kind !== 'response' || r.req.method === 'DELETE') await ctx.cache.delete(key);
  else if (route !== cached) await ctx.cache.set(key, route);
  if (result.kind !== 'response') {
    ctx.metrics.upstreamError(result.kind === 'gone' ? 'gone' : 'connect');
    // A 404 is a runtime not knowing the session: it ended or expired there, or the route was
    // scheduled anew after its runtime left (nothing here tells those apart). 502 and no dial: the runtime is gone.
    const unknown = result.kind === 'gone' && result.status === 404;
    // Once per runtime and interval: a client may send made-up or long-ended session ids without end.
    ctx.upstreamLog.info(route.url, unknown ? 'session unknown to the runtime' : 'session lost with its runtime', {
      runtime: route.runtime,
      outcome: result.kind,
      ...detailOf(result),
    });
    const why = unknown ? 'it ended, expired or lost its runtime' : 'its runtime is gone';
    sendError(r.res, 'session_not_found', `Session not found: ${why}; re-initialize`, id);
    return;
  }
  if (!route.direct && wasForwarded(result.upstream.headers)) followRuntime(ctx, key, route, request);
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
  let failed: SwitchyardError | undefined;
  for (let round = 0; round <= GATEWAY_DEFAULTS.rescheduleMax; round++) {
    // A fresh session id per round: the failed runtime may already hold the
    // previous one as a process, and stickiness would pin the retry to it.
    const minted = randomId();
    let src = source(r, minted);
    const cls = classOf(ctx, src);
    let sessionId = minted;
    if (ctx.classScopes) {
      ctx.classScopes.admit(cls, r.scopes);
      // Its later requests are held to its class's scopes by its id (see ClassScopes).
      sessionId = ctx.classScopes.sessionId(minted, cls);
      src = source(r, sessionId);
    }
    const named = resolvePart('process', ctx.chains.process, src);
    const process = named ?? sessionId;
    const asserted = { class: cls, process: named, sessionId, ...(r.principal ? { principal: r.principal } : {}) };
    const placement = await scheduleUnlessFull(
      ctx,
      src,
      { class: cls, processId: process, threadId: sessionId, sticky: true, ...(exclude.length ? { exclude } : {}) },
      r.signal,
      full ?? failed,
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
    // Once per runtime and interval: a runtime gone or unreachable is met by every initialize placed there.
    ctx.upstreamLog.warn(route.url, 'initialize rescheduled', {
      runtime: placement.runtime,
      outcome: result.kind,
      ...detailOf(result),
    });
    failed = refusalOf(result) ?? failed;
    exclude.push(placement.runtime);
  }
  throw full ?? failed ?? new SwitchyardError('upstream_unavailable', 'No runtime could be reached');
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
  admitScopes(ctx, r, cls);
  const named = resolvePart('process', ctx.chains.process, src);
  const process = named ?? thread;
  const key = named ? processKey(cls, named) : undefined;
  const asserted = { class: cls, process: named, ...(r.principal ? { principal: r.principal } : {}) };
  const request = { class: cls, processId: process, threadId: thread, sticky: true };
  const exclude: string[] = [];
  let found: Route | undefined;
  let full: StreamsFullError | undefined;
  let failed: SwitchyardError | undefined;
  for (let round = 0; round <= GATEWAY_DEFAULTS.rescheduleMax; round++) {
    let route = found ?? (key && round === 0 ? (ctx.cache.local(key) ?? (await ctx.cache.remote(key))) : undefined);
    if (!route) {
      const scheduled = { ...request, ...(exclude.length ? { exclude } : {}) };
      route = routeOf(ctx, await scheduleUnlessFull(ctx, src, scheduled, r.signal, full ?? failed));
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
      if (key && !route.direct && wasForwarded(result.upstream.headers)) followRuntime(ctx, key, route, request);
      relay(ctx, r, result.upstream);
      return;
    }
    if (key) await ctx.cache.delete(key);
    ctx.metrics.upstreamError(result.kind === 'gone' ? 'gone' : 'connect');
    failed = refusalOf(result) ?? failed;
    // A 502 may have come after the proxy read the body: a tool call is never sent twice.
    if (result.kind === 'gone' && r.info?.method === 'tools/call') break;
    // A named process behind a replica that cannot be dialled: its sandbox may live on behind another.
    found = key && result.kind === 'unreachable' && !route.direct ? await rerouted(ctx, r, route, request) : undefined;
    if (found) await ctx.cache.set(key!, found);
    else exclude.push(route.runtime);
  }
  throw full ?? failed ?? new SwitchyardError('upstream_unavailable', 'No runtime could be reached');
}

/** The session header, if any (first value when repeated). */
export function sessionIdOf(req: IncomingMessage): string | undefined {
  const value = req.headers[MCP_SESSION_HEADER];
  return Array.isArray(value) ? value[0] : value;
}
