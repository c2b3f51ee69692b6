import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from 'node:http';
import type http2 from 'node:http2';
import {
  RELAY,
  SwitchyardError,
  type ApiError,
  type EpochInfo,
  type ListedRuntime,
  type RuntimesAnswer,
  type ScheduleResponse,
} from '@switchyard/protocol';
import type { Duplex } from 'node:stream';
import { proxyStreamToTunnel, proxyToTunnel, relayConnection } from '@switchyard/tunnel';
import type { RuntimeSummary } from '@switchyard/scheduling';
import type { ClusterView } from './cluster-view.ts';
import { HOP_HEADER, forwardToReplica, postJson } from './forward.ts';
import { endSocketWithJson, readJson, sendError, sendJson } from './http-util.ts';
import type { Leadership } from './leadership.ts';
import type { LocalPart } from './local-part.ts';
import type { ReplicaMetrics } from './metrics.ts';
import type { ReplicaLogger } from './options.ts';
import { PROXIED_RESPONSE_HEADERS, PROXIED_RESPONSE_HEADERS_DROPPED } from './proxied-answer.ts';
import { parseScheduleRequest } from './schedule-request.ts';
import { publicRuntime, publicState } from './public-runtime.ts';
import { sendSnapshot } from './snapshot-body.ts';
import type { UnschedulableLog } from './unschedulable-log.ts';

export interface ApiContext {
  readonly replicaId: string;
  readonly view: ClusterView;
  readonly part: LocalPart;
  readonly leadership: Leadership;
  readonly metrics: ReplicaMetrics;
  /** Milliseconds since the view was last known to hold the newest epoch; null before the first. */
  readonly epochAgeMs: () => number | null;
  readonly scheduleBodyBytesMax: number;
  readonly logger: ReplicaLogger;
  readonly unschedulableLog: UnschedulableLog;
}

const PROXY_PATH = /^\/api\/proxy\/([^/?]+)(\/[^?]*)?(\?.*)?$/;
const RUNTIME_PATH = /^\/api\/runtime\/([^/?]+)$/;
const RELAY_PATH = /^\/api\/relay\/([^/?]+)$/;
const SNAPSHOT_PATH = /^\/api\/epoch\/(\d+)\/snapshot$/;
/** Routes the scheduler API; returns false for a path it does not serve. */
export function handleApi(ctx: ApiContext, req: IncomingMessage, res: ServerResponse): boolean {
  const url = req.url ?? '/';
  const path = url.split('?', 1)[0]!;
  const proxy = PROXY_PATH.exec(url);
  if (proxy) {
    proxyRequest(ctx, req, res, decodeSegment(proxy[1]!), `${proxy[2] ?? '/'}${proxy[3] ?? ''}`);
    return true;
  }
  if (path === '/api/schedule') {
    if (req.method !== 'POST') return methodNotAllowed(res, 'POST');
    scheduleRequest(ctx, req, res).catch((error: unknown) => sendError(res, error));
    return true;
  }
  if (req.method !== 'GET' && req.method !== 'HEAD') {
    if (path === '/api/epoch' || path === '/api/runtimes' || RUNTIME_PATH.test(path) || SNAPSHOT_PATH.test(path)) {
      return methodNotAllowed(res, 'GET');
    }
    return false;
  }
  if (path === '/api/epoch') {
    sendJson(res, 200, epochInfo(ctx));
    return true;
  }
  if (path === '/api/runtimes') {
    // With everything /api/epoch says, read in the same turn: a reader of both (`switchyard status`)
    // gets a table and an epoch line of one epoch, which two requests cannot promise.
    const answer: RuntimesAnswer = { ...epochInfo(ctx), runtimes: ctx.view.summaries().map(listed) };
    sendJson(res, 200, answer);
    return true;
  }
  const runtime = RUNTIME_PATH.exec(path);
  if (runtime) {
    const id = decodeSegment(runtime[1]!);
    const state = ctx.view.state(id);
    if (state) sendJson(res, 200, { epoch: latestEpoch(ctx), ...publicState(state) });
    else sendJson(res, 404, { error: `unknown runtime ${id}`, code: 'runtime_not_found' });
    return true;
  }
  const snapshot = SNAPSHOT_PATH.exec(path);
  if (snapshot) {
    const epoch = Number(snapshot[1]);
    const runtimes = ctx.leadership.snapshotAt(epoch);
    // Kept epochs are never mutated, so the stream reads the history's own state, not a copy.
    if (runtimes) sendSnapshot(res, req.method, epoch, runtimes).catch((error: unknown) => sendError(res, error));
    else sendJson(res, 404, { error: `epoch ${epoch} is not kept here`, code: 'not_found' });
    return true;
  }
  return false;
}

/** The epoch reads answer from; null before the first commit (the view's own -1 is no epoch number). */
function latestEpoch(ctx: ApiContext): number | null {
  return ctx.view.hasEpoch ? ctx.view.epoch : null;
}

function epochInfo(ctx: ApiContext): EpochInfo {
  return {
    replica: ctx.replicaId,
    epoch: latestEpoch(ctx),
    epochAgeMs: ctx.epochAgeMs(),
    term: ctx.view.term,
    isLeader: ctx.leadership.isLeader,
    leader: ctx.leadership.leader ?? null,
    counts: ctx.view.counts(),
    localRuntimes: ctx.part.size,
  };
}

function listed({ runtime, processes, threads }: RuntimeSummary): ListedRuntime {
  return { ...publicRuntime(runtime), processes, threads };
}

async function scheduleRequest(ctx: ApiContext, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const started = performance.now();
  const body = await readJson(req, ctx.scheduleBodyBytesMax);
  const parsed = parseScheduleRequest(body);
  if (!parsed.ok) {
    ctx.metrics.scheduleRequests.inc({ outcome: 'bad_request' });
    return sendJson(res, 400, { error: parsed.error, code: 'invalid_request' } satisfies ApiError);
  }
  if (!ctx.view.hasEpoch) return forwardSchedule(ctx, req, res, parsed.value);
  const decision = ctx.view.schedule(parsed.value);
  ctx.metrics.scheduleSeconds.observe((performance.now() - started) / 1000);
  ctx.metrics.scheduleRequests.inc({ outcome: decision.ok ? decision.source : 'unschedulable' });
  const base = { epoch: ctx.view.epoch, term: ctx.view.term };
  if (!decision.ok) {
    // An explain is a dry run (`switchyard explain`): nothing to warn an operator of.
    ctx.unschedulableLog.log(
      { class: parsed.value.class, ...base, runtimes: ctx.view.counts().runtimes, reason: decision.unschedulable },
      parsed.value.explain === true,
    );
    return sendJson(res, 503, { ...decision, ...base } satisfies ScheduleResponse);
  }
  const runtime = ctx.view.runtime(decision.runtime);
  const ownerUrl = runtime?.ownerUrl;
  const response: ScheduleResponse = {
    ...decision,
    ...base,
    ...(runtime ? { owner: runtime.owner } : {}),
    ...(ownerUrl ? { proxyUrl: `${ownerUrl}/api/proxy/${encodeURIComponent(decision.runtime)}` } : {}),
    ...(runtime?.address ? { address: runtime.address } : {}),
  };
  sendJson(res, 200, response);
}

/** A replica with no epoch yet asks the leader rather than answer from nothing. */
async function forwardSchedule(
  ctx: ApiContext,
  req: IncomingMessage,
  res: ServerResponse,
  body: unknown,
): Promise<void> {
  const leader = ctx.leadership.leader;
  if (req.headers[HOP_HEADER] || !leader || leader.id === ctx.replicaId) {
    throw new SwitchyardError('not_ready', 'no epoch committed yet; retry shortly');
  }
  ctx.metrics.scheduleRequests.inc({ outcome: 'forwarded' });
  const answer = await postJson(`${leader.url}/api/schedule`, body, 5000, req.headers.authorization).catch(
    (cause: unknown) => {
      throw new SwitchyardError('not_ready', 'no epoch yet and the leader is unreachable', { cause });
    },
  );
  sendJson(res, answer.status, answer.body);
}

/**
 * The one route served over HTTP/2 (h2c): `/api/proxy/:runtime/*`, which a
 * gateway uses for the event streams it holds. Only a runtime whose tunnel
 * this replica holds is reached; a gateway proxies through the owner (the
 * schedule answer names it), so there is no forwarding to another replica
 * here: a runtime that moved is a 502, after which a gateway asks over
 * HTTP/1.1, which forwards.
 */
export function handleApiStream(ctx: ApiContext, stream: http2.ServerHttp2Stream, headers: http2.IncomingHttpHeaders) {
  // A reset with an error code, or the client's connection failing, is an 'error' of the stream; with no
  // listener, one that came while the stream waits for its runtime (afterRedial) would end the process.
  stream.on('error', () => {});
  const proxy = PROXY_PATH.exec(String(headers[':path'] ?? '/'));
  if (!proxy) {
    const body = JSON.stringify({ error: 'only /api/proxy/ is served over HTTP/2', code: 'not_found' });
    stream.respond({ ':status': 404, 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
    return void stream.end(body);
  }
  ctx.metrics.proxyRequests.inc();
  const runtimeId = decodeSegment(proxy[1]!);
  dropOriginCredentials(headers);
  const path = `${proxy[2] ?? '/'}${proxy[3] ?? ''}`;
  ctx.part.afterRedial(runtimeId, () => {
    if (!stream.destroyed) proxyStreamToTunnel(ctx.part.tunnel(runtimeId), stream, headers, path, { runtimeId });
  });
}

/**
 * `GET /api/relay/:runtime` with `Upgrade: switchyard-relay`: a gateway's
 * connection carried whole into the runtime's tunnel (see
 * `relayConnection`). Only a runtime whose tunnel this replica holds is
 * reached; anything else is a refusal, after which a gateway sends that
 * request through `/api/proxy` (which forwards to the owner).
 */
export function handleRelay(ctx: ApiContext, req: IncomingMessage, socket: Duplex, head: Buffer): void {
  const relay = RELAY_PATH.exec((req.url ?? '/').split('?', 1)[0]!);
  if (!relay || req.headers.upgrade?.toLowerCase() !== RELAY.upgrade) {
    return endSocketWithJson(socket, 400, {
      error: `expected GET /api/relay/<runtime> with Upgrade: ${RELAY.upgrade}`,
      code: 'invalid_request',
    });
  }
  ctx.metrics.relayConnections.inc();
  const runtimeId = decodeSegment(relay[1]!);
  relayConnection(ctx.part.tunnel(runtimeId), socket, head, runtimeId);
}

/**
 * `/api/proxy/:runtime/*` over HTTP/1.1: into the runtime's tunnel when this
 * replica holds it, else forwarded to the owner. A runtime whose connection
 * here broke a moment ago is waited for (`LocalPart.afterRedial`): it redials
 * at once, and its sessions carry on instead of being lost.
 */
function proxyRequest(ctx: ApiContext, req: IncomingMessage, res: ServerResponse, runtimeId: string, rest: string) {
  ctx.metrics.proxyRequests.inc();
  ctx.part.afterRedial(runtimeId, () => {
    if (!res.destroyed) proxyHere(ctx, req, res, runtimeId, rest);
  });
}

function proxyHere(ctx: ApiContext, req: IncomingMessage, res: ServerResponse, runtimeId: string, rest: string) {
  const tunnel = ctx.part.tunnel(runtimeId);
  if (tunnel) {
    dropOriginCredentials(req.headers);
    return proxyToTunnel(tunnel, req, res, rest, {
      runtimeId,
      responseHeaders: PROXIED_RESPONSE_HEADERS,
      droppedResponseHeaders: PROXIED_RESPONSE_HEADERS_DROPPED,
    });
  }
  const owner = ctx.view.runtime(runtimeId);
  if (owner?.ownerUrl && owner.owner !== ctx.replicaId && !req.headers[HOP_HEADER]) {
    // The answer reaches the browser from this origin, whatever the owner does: one of an earlier release (a
    // rolling upgrade) passes cookies into the tunnel and the runtime's headers out. The API token goes on: the
    // owner checks it.
    delete req.headers.cookie;
    const target = `${owner.ownerUrl}/api/proxy/${encodeURIComponent(runtimeId)}${rest}`;
    return forwardToReplica(req, res, target, runtimeId, {
      setHeaders: PROXIED_RESPONSE_HEADERS,
      droppedHeaders: PROXIED_RESPONSE_HEADERS_DROPPED,
    });
  }
  req.resume();
  // Without a tunnel the proxy refuses as it does everywhere: 502 `runtime not connected`.
  proxyToTunnel(undefined, req, res, rest, { runtimeId });
}

/**
 * Removes from a request about to enter a tunnel what a caller holds for this replica's origin, never for a
 * runtime: the API token (for this replica, and the owner when forwarded), and cookies. Only a browser sends
 * cookies here (a gateway strips its clients'): those of this origin, and of its whole site, such as the
 * session of a sign-in proxy in front of the live page, which a runtime could otherwise collect by getting
 * an operator to open a link to its own `/api/proxy` path.
 */
function dropOriginCredentials(headers: IncomingHttpHeaders): void {
  delete headers.authorization;
  delete headers.cookie;
}

function methodNotAllowed(res: ServerResponse, allow: string): true {
  res.setHeader('allow', allow);
  sendJson(res, 405, { error: 'method not allowed', code: 'method_not_allowed' });
  return true;
}

function decodeSegment(segment: string): string {
  try {
    return decodeURIComponent(segment);
  } catch {
    return segment;
  }
}
