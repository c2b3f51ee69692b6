import { AsyncLocalStorage } from 'node:async_hooks';
import { randomUUID } from 'node:crypto';
import {
  McpServer,
  createMcpHandler,
  isInitializeRequest,
  isJsonContentType,
  isLegacyRequest,
  type McpHttpHandler,
} from '@modelcontextprotocol/server';
import {
  DEFAULT_CLASS,
  IDENTITY_HEADERS,
  MCP_SESSION_HEADER,
  SwitchyardError,
  isIdentityValue,
} from '@switchyard/protocol';
import { SessionEventStore } from './event-store.ts';
import { SandboxEventBus } from './listen-bus.ts';
import { SessionTransport } from './session-transport.ts';
import type { InFlight } from './in-flight.ts';
import type { Sandbox, SandboxRegistry } from './registry.ts';
import type { Session, SessionTable } from './sessions.ts';
import { countingServer, type ToolCallCounting } from './tool-calls.ts';
import type { Logger, StateReporter } from './types.ts';
import { type Answer, settled } from './answer.ts';
import { errorResponse, readJson, requestIdOf, responseForError } from './wire.ts';

export interface EndpointDeps {
  readonly registry: SandboxRegistry;
  readonly sessions: SessionTable;
  readonly reporter: StateReporter;
  readonly logger: Logger;
  /** Class used when a request names none; undefined when `default` is not configured. */
  readonly defaultClass: string | undefined;
  /** Where POSTs being answered are counted, listen streams aside. */
  readonly inFlight: InFlight;
  /** Where tool calls are counted; none when undefined. */
  readonly toolCalls: ToolCallCounting | undefined;
}

const SERVER_INFO = { name: 'switchyard-sandbox', version: '0.1.0' };
/** SSE events kept per legacy session for `Last-Event-ID` resumption. */
const SESSION_EVENTS_MAX = 1000;
/**
 * Bytes of those events kept per legacy session: a resume wants the last
 * few events of a stream, and this holds thousands of small ones or a few
 * results of megabytes, where a count alone let a session hold gigabytes.
 */
const SESSION_EVENT_BYTES_MAX = 8 * 1024 * 1024;
/** Reconnect delay suggested to clients on SSE streams. */
const SSE_RETRY_MS = 1000;

/**
 * Builds the SDK server one session or one request talks to, with the
 * sandbox's surface installed and, given `toolCalls`, its tool calls counted.
 */
export function serverFor(
  sandbox: Sandbox,
  toolCalls: ToolCallCounting | undefined,
): { server: McpServer; detach: () => void } {
  const { capabilities } = sandbox.instance;
  const server = toolCalls
    ? countingServer(SERVER_INFO, capabilities, sandbox.className, toolCalls)
    : new McpServer(SERVER_INFO, { capabilities });
  const detach = sandbox.instance.register(server);
  return { server, detach };
}

function header(request: Request, name: string): string | undefined {
  return request.headers.get(name) ?? undefined;
}

/** Reads and checks an identity header; absent is fine, malformed is the client's error. */
function identityHeader(request: Request, name: string): string | undefined {
  const value = header(request, name);
  if (value === undefined) return undefined;
  if (!isIdentityValue(value))
    throw new SwitchyardError('bad_identity', `${name}: must be 1-128 characters from [A-Za-z0-9._:@-]`);
  return value;
}

/**
 * The runtime's `/mcp` endpoint on web-standard requests: legacy sessions on
 * one SDK transport each, 2026-07-28 requests through the SDK's per-request
 * handler with the sandbox chosen by `X-Switchyard-Process`. Each answer
 * names what it holds (a session's place, a sandbox) for its writer to
 * release when the response is over (see `answer.ts`).
 */
export class McpEndpoint {
  readonly #deps: EndpointDeps;
  readonly #current = new AsyncLocalStorage<Sandbox>();
  readonly #modern: McpHttpHandler;
  /** Where the sandboxes' change events reach their 2026-07-28 listen streams. */
  readonly #listenStreams = new SandboxEventBus<Sandbox>(() => this.#current.getStore());

  constructor(deps: EndpointDeps) {
    this.#deps = deps;
    this.#modern = createMcpHandler(
      () => {
        // The SDK builds a server per modern request inside our fetch, so the
        // request's sandbox is the one in the async context.
        const sandbox = this.#current.getStore();
        if (!sandbox) throw new SwitchyardError('internal', 'modern request outside a sandbox context');
        const { server, detach } = serverFor(sandbox, deps.toolCalls);
        server.server.onclose = detach;
        return server;
      },
      {
        legacy: 'reject',
        bus: this.#listenStreams,
        onerror: (error) =>
          deps.logger.debug({ event: 'mcp.modern_error', err: String(error) }, 'modern request error'),
      },
    );
  }

  readonly handle = async (request: Request): Promise<Answer> => {
    let id: ReturnType<typeof requestIdOf> = null;
    try {
      const path = new URL(request.url).pathname;
      if (path !== '/mcp') return settled(errorResponse('not_found', `no route for ${path}`));
      if (!['POST', 'GET', 'DELETE'].includes(request.method)) {
        return settled(notAllowed(`${request.method} not allowed on /mcp`, 'GET, POST, DELETE'));
      }
      if (request.method !== 'POST') return await this.#legacyFetch(request, (value) => (id = value));
      const posted = await readOnce(request);
      const post = async (): Promise<Answer> => {
        if (!(await isLegacyRequest(posted.request, posted.body))) return await this.#modernFetch(posted);
        return await this.#legacyFetch(posted.request, (value) => (id = value), posted.body);
      };
      // A listen stream lasts as long as its client: a closing host does not wait for it.
      return isListen(posted.body) ? await post() : await this.#deps.inFlight.answer(post);
    } catch (error) {
      if (!(error instanceof SwitchyardError)) {
        this.#deps.logger.error({ event: 'mcp.failed', err: String(error) }, 'mcp request failed');
      }
      return settled(responseForError(error, id));
    }
  };

  async close(): Promise<void> {
    await this.#modern.close();
  }

  #className(request: Request): string {
    const named = identityHeader(request, IDENTITY_HEADERS.class);
    const className = named ?? this.#deps.defaultClass;
    if (className === undefined) {
      throw new SwitchyardError(
        'invalid_request',
        `no ${IDENTITY_HEADERS.class} header and no "${DEFAULT_CLASS}" class`,
      );
    }
    return className;
  }

  async #modernFetch({ request, body }: Posted): Promise<Answer> {
    const refused = refusedForHeaders(request, 'modern');
    if (refused) return settled(refused);
    const className = this.#className(request);
    const named = identityHeader(request, IDENTITY_HEADERS.process);
    const { registry } = this.#deps;
    let sandbox: Sandbox;
    try {
      sandbox = await registry.acquire(className, named ?? randomUUID(), {
        ephemeral: named === undefined,
        named: named !== undefined,
      });
    } catch (error) {
      return settled(responseForError(error, requestIdOf(body ?? (await readJson(request).catch(() => null)))));
    }
    const stopListening = this.#listenFor(sandbox, body);
    const release = (): void => {
      stopListening();
      registry.release(sandbox);
    };
    try {
      return { response: await this.#current.run(sandbox, () => this.#modern.fetch(request, parsed(body))), release };
    } catch (error) {
      release();
      throw error;
    }
  }

  /**
   * A `subscriptions/listen` request opens a stream for as long as its
   * response lasts: the sandbox is told which resources it watches and
   * where its change events go. Only a sandbox that has such events is
   * asked, from the body read for routing (one that was not JSON opens none:
   * the SDK answers it).
   */
  #listenFor(sandbox: Sandbox, parsedBody: unknown): () => void {
    const { instance } = sandbox;
    if (!instance.listen) return () => {};
    const body = parsedBody as
      { method?: unknown; params?: { notifications?: { resourceSubscriptions?: unknown } } } | null | undefined;
    if (body?.method !== 'subscriptions/listen') return () => {};
    const named = body.params?.notifications?.resourceSubscriptions;
    const resources = Array.isArray(named) ? named.filter((u): u is string => typeof u === 'string') : [];
    return instance.listen(resources, (event) => this.#listenStreams.publishTo(sandbox, event));
  }

  async #legacyFetch(
    request: Request,
    setId: (id: ReturnType<typeof requestIdOf>) => void,
    parsedBody?: unknown,
  ): Promise<Answer> {
    const sessionId = header(request, MCP_SESSION_HEADER);
    if (sessionId !== undefined) {
      const session = this.#deps.sessions.get(sessionId);
      // Another principal's session is answered as one that does not exist: a gateway
      // binds sessions to principals too, but only while their routes are in its cache.
      if (!session || session.principal !== header(request, IDENTITY_HEADERS.principal)) {
        return settled(errorResponse('session_not_found', `session not found`));
      }
      return this.#inSession(session, request, parsedBody);
    }
    if (request.method !== 'POST') {
      return settled(notAllowed(`${request.method} /mcp needs an ${MCP_SESSION_HEADER} header`, 'POST'));
    }
    const body = parsedBody ?? (await readJson(request));
    setId(requestIdOf(body));
    if (!isInitializeRequest(body)) return settled(refusalWithoutSession(body));
    // Sent as a notification, it would start a sandbox for a session no client could learn of (the answer, 202,
    // carries no session): refused before anything is started.
    if (requestIdOf(body) === null) {
      return settled(errorResponse('invalid_request', 'initialize is a request: it needs an id'));
    }
    const refused = refusedForHeaders(request, 'legacy');
    if (refused) return settled(refused);
    return this.#initialize(request, body);
  }

  async #inSession(session: Session, request: Request, parsedBody?: unknown): Promise<Answer> {
    // A client opens the session's event stream again only once it gave up on the one it had, which may
    // still look open here (a peer that vanished without a FIN holds it for minutes): the newer takes its
    // place, the older ends, rather than a 409 until TCP gives up. (A resume, with Last-Event-ID, takes over
    // the stream it names inside the SDK: see SessionEventStore.)
    if (opensEventStream(request)) session.transport.closeStandaloneSSEStream();
    const begun = this.#deps.sessions.begin(session);
    // Open for as long as its answer: an upstream's request with no call to carry it needs one (see roots.ts).
    const closeStream = request.method === 'GET' ? session.transport.openEventStream() : undefined;
    const end = (): void => {
      closeStream?.();
      begun();
    };
    let response: Response;
    try {
      response = await session.transport.handleRequest(request, parsed(parsedBody));
    } catch (error) {
      end();
      throw error;
    }
    if (request.method === 'DELETE' && response.ok) {
      end();
      this.#deps.sessions.close(session.id, 'deleted');
      return settled(response);
    }
    return { response, release: end };
  }

  async #initialize(request: Request, body: unknown): Promise<Answer> {
    const { sessions } = this.#deps;
    const className = this.#className(request);
    const named = identityHeader(request, IDENTITY_HEADERS.process);
    const adopted = identityHeader(request, IDENTITY_HEADERS.sessionId);
    const sessionId = adopted ?? randomUUID();
    if (sessions.has(sessionId)) throw new SwitchyardError('invalid_request', 'session id already in use');
    if (sessions.full) throw new SwitchyardError('capacity_exhausted', 'session limit reached');
    const opened = sessions.reserve(sessionId);
    let session: Session;
    try {
      session = await this.#open(request, className, named, sessionId);
    } finally {
      opened();
    }
    let answer: Answer;
    try {
      answer = await this.#inSession(session, request, body);
    } catch (error) {
      // Its client learns no session id: nobody would use the session, which idle would hold, with its sandbox.
      sessions.close(sessionId, 'initialize_failed');
      throw error;
    }
    // An initialize whose answer does not hand its client the session leaves none behind: one the
    // transport refused, one it failed after naming the session, one sent as a notification (202).
    if (!handsOver(answer.response, sessionId)) sessions.close(sessionId, 'initialize_failed');
    return {
      response: answer.response,
      release: () => {
        answer.release();
        // Its client left before it had its answer (while the sandbox started, say): nobody will use the
        // session, which idle would hold its sandbox, and its place under sandboxesMax, for sessionIdleMs.
        if (request.signal.aborted) sessions.close(sessionId, 'abandoned');
      },
    };
  }

  /** Starts (or joins) the sandbox of a new session and adds the session, its id held meanwhile. */
  async #open(request: Request, className: string, named: string | undefined, sessionId: string): Promise<Session> {
    const { sessions, registry, reporter } = this.#deps;
    const sandbox = await registry.acquire(className, named ?? sessionId, {
      ephemeral: named === undefined,
      named: named !== undefined,
      forgiveDeath: true,
    });
    // Until the session is added, the sandbox reference is ours to give back, whatever fails.
    let session: Session;
    try {
      session = await this.#connect(sandbox, sessionId, header(request, IDENTITY_HEADERS.principal));
    } catch (error) {
      registry.release(sandbox);
      throw error;
    }
    sessions.add(session);
    reporter.addThread(sandbox.id, sessionId);
    return session;
  }

  /** Builds a session's server on `sandbox` and connects its transport; detaches the server if that fails. */
  async #connect(sandbox: Sandbox, sessionId: string, principal: string | undefined): Promise<Session> {
    const { server, detach } = serverFor(sandbox, this.#deps.toolCalls);
    try {
      const transport = new SessionTransport({
        sessionIdGenerator: () => sessionId,
        eventStore: new SessionEventStore(SESSION_EVENTS_MAX, SESSION_EVENT_BYTES_MAX),
        retryInterval: SSE_RETRY_MS,
      });
      await server.connect(transport);
      return {
        id: sessionId,
        sandbox,
        server,
        transport,
        detach,
        principal,
        inflight: 0,
        idle: undefined,
        closed: false,
      };
    } catch (error) {
      detach();
      throw error;
    }
  }
}

/** True when an initialize's answer gives its client the session: a success naming it. */
function handsOver(response: Response, sessionId: string): boolean {
  return response.ok && response.headers.get(MCP_SESSION_HEADER) === sessionId;
}

/** A 405, which HTTP requires to name the methods the endpoint takes (as the gateway's do). */
function notAllowed(message: string, allow: string): Response {
  const response = errorResponse('method_not_allowed', message);
  response.headers.set('allow', allow);
  return response;
}

/**
 * What the SDK refuses a POST for by its headers alone (a legacy transport:
 * an Accept without both media types, then a Content-Type that is not JSON;
 * the 2026-07-28 handler: the Content-Type), answered as the SDK does but
 * before a sandbox is started for it: started first, it costs a stdio class
 * a child process per refusal, and a named sandbox is then kept for its
 * class's expireSeconds though no session or request holds it.
 */
function refusedForHeaders(request: Request, era: 'legacy' | 'modern'): Response | undefined {
  const accept = request.headers.get('accept') ?? '';
  if (era === 'legacy' && !(accept.includes('application/json') && accept.includes('text/event-stream'))) {
    return errorResponse(
      'not_acceptable',
      'Not Acceptable: Client must accept both application/json and text/event-stream',
    );
  }
  if (!isJsonContentType(request.headers.get('content-type'))) {
    return errorResponse('unsupported_media_type', 'Unsupported Media Type: Content-Type must be application/json');
  }
  return undefined;
}

/** A 2026-07-28 `subscriptions/listen` request, whose stream lasts as long as its client. */
function isListen(body: unknown): boolean {
  return (body as { method?: unknown } | null | undefined)?.method === 'subscriptions/listen';
}

/** A POST whose body was read once; `body` is its JSON, absent when it is not JSON. */
interface Posted {
  readonly request: Request;
  readonly body?: unknown;
}

/**
 * Reads a POST body once for everything that needs it: the routing
 * (`isLegacyRequest`), the session checks and the SDK's transports all take
 * the parsed body, where each would otherwise read its own copy of the
 * stream (a clone per read) and parse it again. A body that is empty or not
 * JSON is handed on as a fresh request with the same text, so the SDK
 * answers it exactly as before.
 */
async function readOnce(request: Request): Promise<Posted> {
  const text = await request.text();
  if (text.length > 0) {
    try {
      return { request, body: JSON.parse(text) as unknown };
    } catch {
      // Not JSON: the SDK's own reading answers it.
    }
  }
  const { url, method, headers, signal } = request;
  return { request: new Request(url, { method, headers, signal, body: text }) };
}

/** The SDK's option for a body already parsed (none when it was not JSON). */
function parsed(body: unknown): { parsedBody: unknown } | undefined {
  return body === undefined ? undefined : { parsedBody: body };
}

/**
 * Why a POST without a session that is not a valid `initialize` is refused:
 * an `initialize` that is malformed or batched (the 2025-03-26 revision
 * forbids that) is named as such, not as a missing session.
 */
function refusalWithoutSession(body: unknown): Response {
  const id = requestIdOf(body);
  const isInitialize = (m: unknown): boolean => (m as { method?: unknown } | null)?.method === 'initialize';
  if (Array.isArray(body) && body.some(isInitialize)) {
    return errorResponse('invalid_request', 'initialize must not be part of a JSON-RPC batch');
  }
  if (isInitialize(body)) {
    return errorResponse(
      'invalid_params',
      'initialize needs params with protocolVersion, capabilities and clientInfo',
      id,
    );
  }
  return errorResponse('session_required', `${MCP_SESSION_HEADER} header required`, id);
}

/**
 * A GET for a legacy session's own event stream (not a resume of one, which names its stream). An
 * empty Last-Event-ID names none: the SDK opens the session's stream for it, as for no header.
 */
function opensEventStream(request: Request): boolean {
  return (
    request.method === 'GET' &&
    !request.headers.get('last-event-id') &&
    request.headers.get('accept')?.includes('text/event-stream') === true
  );
}
