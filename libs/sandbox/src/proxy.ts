import { Client, SdkError, SdkErrorCode, type CacheMode, type Transport } from '@modelcontextprotocol/client';
import type { McpServer, ServerCapabilities, ServerContext, ServerEvent } from '@modelcontextprotocol/server';
import { systemClock, type Clock } from '@switchyard/clock';
import { CallRounds, takesInputInRounds } from './call-rounds.ts';
import { DeathFlag, type ExitCause, type SandboxInstance } from './engine.ts';
import { UpstreamAsks } from './upstream-asks.ts';

/**
 * Upper bound on one forwarded upstream request, tool calls included, which
 * may run long (the SDK's default, 60 s, is too short for many tools). REST
 * tool calls have the same bound (see toolcall.ts).
 */
export const UPSTREAM_TIMEOUT_MS = 10 * 60_000;
/**
 * How long an upstream list result is served from the client's cache. Only
 * lists whose upstream announces changes (`listChanged`) use the cache, and
 * each announcement evicts its entry, so the bound only caps how long a
 * missed announcement could leave a list stale.
 */
const LIST_CACHE_TTL_MS = 10 * 60_000;
/** Bound on each priming request, so a hung upstream cannot hold a pool slot. */
const PRIME_TIMEOUT_MS = 10_000;
/**
 * A tool name no server is expected to have: priming calls it so the
 * upstream's `tools/call` path is loaded before a client's first call. It is
 * not sent when the upstream lists a tool of that name.
 */
const ABSENT_TOOL = 'switchyard-warm-up-absent-tool';

/**
 * The SDK client every proxying engine talks to its upstream with. It
 * offers sampling, elicitation (both modes: an SDK server sends no URL one
 * to a client that declares the form mode only) and roots (announcing
 * their changes), which it passes on to the downstream client (see
 * ProxyInstance); one that lacks them gets the upstream's request refused.
 */
export function upstreamClient(): Client {
  return new Client(
    { name: 'switchyard-runtime', version: '0.1.0' },
    {
      defaultCacheTtlMs: LIST_CACHE_TTL_MS,
      capabilities: { sampling: {}, elicitation: { form: {}, url: {} }, roots: { listChanged: true } },
    },
  );
}

/**
 * Connects `client` to its upstream, failing when `initialize` is not
 * answered within `seconds`: a server stuck starting (loading, or a wrapper
 * waiting on a prompt) would otherwise hold the start for the SDK's 60 s,
 * as long as the client waits, which then learns only that it timed out.
 */
export async function connectUpstream(client: Client, transport: Transport, seconds: number): Promise<void> {
  try {
    await client.connect(transport, { timeout: seconds * 1000 });
  } catch (error) {
    if (error instanceof SdkError && error.code === SdkErrorCode.RequestTimeout) {
      throw new Error(`no answer to initialize within ${seconds} s`, { cause: error });
    }
    throw error;
  }
}

type Params = Record<string, unknown> | undefined;
/** An open 2026-07-28 listen stream of this sandbox (see `listen`). */
type Watch = { readonly publish: (event: ServerEvent) => void };
/** Who may be subscribed to a resource: a legacy session's server or a listen stream. */
type Subscriber = McpServer | Watch;
const isWatch = (s: Subscriber): s is Watch => 'publish' in s;
type ProgressParams = { progress: number; total?: number; message?: string };
/** Where a call's progress goes: the client request in progress, if any, told of the relays pending (see CallRounds). */
type RelayTarget = { readonly round: ServerContext | undefined; relaying?(relays: Promise<void>): void };

/**
 * A sandbox that is an upstream MCP server reached through an SDK client:
 * it re-exposes the upstream tools, resources, prompts and completions on
 * every server registered with it, forwards list-changed notifications and
 * log messages to all of them (each filters by its client's level),
 * resource updates to the ones subscribed to that resource (the upstream
 * stays subscribed while any is), the same changes to 2026-07-28 listen
 * streams (which name the resources they watch), and relays progress —
 * awaiting the relays before returning a result, since the modern era drops
 * notifications sent after the result. The upstream's own requests
 * (sampling, elicitation, roots) go to a downstream client, and a client's
 * change of roots to the upstream.
 */
export class ProxyInstance implements SandboxInstance {
  readonly capabilities: ServerCapabilities;
  readonly #client: Client;
  /** Per list kind: served from the client's cache only if asked to and the upstream announces its changes. */
  readonly #lists: { readonly tools: CacheMode; readonly resources: CacheMode; readonly prompts: CacheMode };
  readonly #death = new DeathFlag();
  readonly #servers = new Set<McpServer>();
  readonly #cleanup: () => Promise<void>;
  readonly #exitCause: (() => ExitCause | undefined) | undefined;
  readonly #onCancelled: ((tool: string) => void) | undefined;
  #destroyed = false;
  /** Tool calls in flight upstream, who the upstream's own requests are sent to. */
  readonly #asks: UpstreamAsks;
  /** The calls of 2026-07-28 clients, which take the upstream's requests in rounds. */
  readonly #rounds: CallRounds;
  /** Progress relays of calls in flight, by the upstream token we chose. */
  readonly #relays = new Map<string, (p: ProgressParams) => void>();
  #progressSeq = 0;
  /** Resource URI → the legacy sessions' servers and listen streams subscribed to it; the upstream stays subscribed while any is. */
  readonly #subscribers = new Map<string, Set<Subscriber>>();
  /** Open 2026-07-28 listen streams. */
  readonly #watches = new Set<Watch>();

  /**
   * `cacheLists`: serve lists from the client's cache (default false). Only
   * for upstreams whose change announcements always reach the client, as a
   * child's stdout does; a remote server may have no channel to announce on.
   * `exitCause`: how the upstream's process ended, for the log of its death.
   * `onCancelled`: told of each tool call its client cancelled (the
   * engine context's, so the runtime counts proxied calls as builtin ones).
   * `clock`: times the wait of a 2026-07-28 call between rounds (see CallRounds).
   */
  constructor(
    client: Client,
    transport: Transport,
    cleanup: () => Promise<void>,
    opts: {
      cacheLists?: boolean;
      exitCause?: () => ExitCause | undefined;
      onCancelled?: (tool: string) => void;
      clock?: Clock;
    } = {},
  ) {
    this.#client = client;
    this.#rounds = new CallRounds(opts.clock ?? systemClock, UPSTREAM_TIMEOUT_MS);
    this.#interceptProgress(transport);
    this.#cleanup = cleanup;
    this.#exitCause = opts.exitCause;
    this.#onCancelled = opts.onCancelled;
    const upstream = client.getServerCapabilities() ?? {};
    const caps: ServerCapabilities = {};
    if (upstream.tools) caps.tools = { listChanged: true };
    if (upstream.resources) {
      caps.resources = { listChanged: true, ...(upstream.resources.subscribe ? { subscribe: true } : {}) };
    }
    // Each client's McpServer keeps its own level (logging/setLevel) and filters what is relayed to it.
    if (upstream.logging) caps.logging = {};
    if (upstream.prompts) caps.prompts = { listChanged: true };
    if (upstream.completions) caps.completions = {};
    this.capabilities = caps;
    const mode = (listChanged: boolean | undefined): CacheMode => (opts.cacheLists && listChanged ? 'use' : 'bypass');
    this.#lists = {
      tools: mode(upstream.tools?.listChanged),
      resources: mode(upstream.resources?.listChanged),
      prompts: mode(upstream.prompts?.listChanged),
    };
    // Dead only once the requests in flight have had their answers: the client
    // rejects them after onclose (a chain of microtasks to the sessions'
    // streams), and the death closes the sessions, which would drop those
    // answers and leave a legacy client waiting for its own timeout.
    client.onclose = () => {
      if (!this.#destroyed) setImmediate(() => this.#death.kill());
    };
    const each = (send: (s: McpServer) => void): void => {
      for (const s of this.#servers) if (s.isConnected()) send(s);
    };
    this.#asks = new UpstreamAsks(client, this.#servers, UPSTREAM_TIMEOUT_MS);
    client.setNotificationHandler('notifications/tools/list_changed', () => {
      each((s) => s.sendToolListChanged());
      this.#toListeners({ kind: 'tools_list_changed' });
    });
    client.setNotificationHandler('notifications/resources/list_changed', () => {
      each((s) => s.sendResourceListChanged());
      this.#toListeners({ kind: 'resources_list_changed' });
    });
    client.setNotificationHandler('notifications/prompts/list_changed', () => {
      each((s) => s.sendPromptListChanged());
      this.#toListeners({ kind: 'prompts_list_changed' });
    });
    client.setNotificationHandler('notifications/message', (n) =>
      each((s) => void s.server.sendLoggingMessage(n.params, s.server.transport?.sessionId).catch(() => undefined)),
    );
    client.setNotificationHandler('notifications/resources/updated', (n) => {
      const subscribers = [...(this.#subscribers.get(n.params.uri) ?? [])];
      for (const s of subscribers) {
        if (!isWatch(s) && s.isConnected()) void s.server.sendResourceUpdated(n.params).catch(() => undefined);
      }
      if (subscribers.some(isWatch))
        this.#toListeners({ kind: 'resource_updated', uri: n.params.uri, params: n.params });
    });
  }

  /**
   * Every watch publishes to all of this sandbox's listen streams, which
   * filter for themselves: one publish per event, or each stream would get
   * it once per open stream.
   */
  #toListeners(event: ServerEvent): void {
    this.#watches.values().next().value?.publish(event);
  }

  listen(resources: readonly string[], publish: (event: ServerEvent) => void): () => void {
    const watch: Watch = { publish };
    this.#watches.add(watch);
    const uris = this.capabilities.resources?.subscribe ? [...new Set(resources)] : [];
    for (const uri of uris) {
      const subscribers = this.#subscribersOf(uri);
      // A failed subscription shows as updates that never come, as it would upstream.
      if (subscribers.size === 0) void this.#client.subscribeResource({ uri }).catch(() => undefined);
      subscribers.add(watch);
    }
    return () => {
      this.#watches.delete(watch);
      for (const uri of uris) {
        if (this.#leave(watch, uri)) void this.#client.unsubscribeResource({ uri }).catch(() => undefined);
      }
    };
  }

  /**
   * Progress is taken from the transport, before the SDK client sees it: the
   * client may dispatch a notification that arrived with the result after
   * settling the call, and would then drop it as late.
   */
  #interceptProgress(transport: Transport): void {
    const inner = transport.onmessage;
    transport.onmessage = (message, extra) => {
      if ('method' in message && message.method === 'notifications/progress' && !('id' in message)) {
        const params = message.params as ProgressParams & { progressToken?: unknown };
        const relay = typeof params.progressToken === 'string' ? this.#relays.get(params.progressToken) : undefined;
        if (relay) {
          const { progressToken: _token, ...rest } = params;
          return relay(rest);
        }
      }
      inner?.(message, extra);
    };
  }

  get dead(): boolean {
    return this.#death.dead;
  }

  onDead(listener: () => void): void {
    this.#death.onDead(listener);
  }

  exitCause(): ExitCause | undefined {
    return this.#exitCause?.();
  }

  bind(): void {
    // The upstream server does not know its sandbox id; nothing to bind.
  }

  /**
   * Lists the upstream's tools (filling the list cache) and calls a tool it
   * does not have. Upstream servers load and compile their request paths
   * lazily, which a fresh child otherwise does on a client's first call;
   * an unknown tool is answered with an error and runs no tool.
   */
  async prime(): Promise<void> {
    if (!this.capabilities.tools) return;
    const opts = { timeout: PRIME_TIMEOUT_MS };
    const { tools } = await this.#client.listTools(undefined, { ...opts, cacheMode: this.#lists.tools });
    if (tools.some((t) => t.name === ABSENT_TOOL)) return;
    await this.#client.callTool({ name: ABSENT_TOOL, arguments: {} }, opts).catch(() => undefined);
  }

  register(server: McpServer): () => void {
    const s = server.server;
    const c = this.#client;
    const opts = (ctx: ServerContext) => ({ signal: ctx.mcpReq.signal, timeout: UPSTREAM_TIMEOUT_MS });
    const list = (ctx: ServerContext, cacheMode: CacheMode) => ({ ...opts(ctx), cacheMode });
    const { tools, resources, prompts } = this.#lists;
    if (this.capabilities.tools) {
      s.setRequestHandler('tools/list', (req, ctx) => c.listTools(req.params as Params, list(ctx, tools)));
      s.setRequestHandler('tools/call', (req, ctx) =>
        this.#callTool(req.params, ctx, server, takesInputInRounds(s.getNegotiatedProtocolVersion())),
      );
    }
    if (this.capabilities.resources) {
      s.setRequestHandler('resources/list', (req, ctx) => c.listResources(req.params as Params, list(ctx, resources)));
      s.setRequestHandler('resources/templates/list', (req, ctx) =>
        c.listResourceTemplates(req.params as Params, list(ctx, resources)),
      );
      // Contents change without a list announcement; always read through.
      s.setRequestHandler('resources/read', (req, ctx) => c.readResource(req.params, list(ctx, 'bypass')));
    }
    if (this.capabilities.prompts) {
      s.setRequestHandler('prompts/list', (req, ctx) => c.listPrompts(req.params as Params, list(ctx, prompts)));
      s.setRequestHandler('prompts/get', (req, ctx) => c.getPrompt(req.params, opts(ctx)));
    }
    if (this.capabilities.completions) {
      s.setRequestHandler('completion/complete', (req, ctx) => c.complete(req.params, opts(ctx)));
    }
    if (this.capabilities.resources?.subscribe) {
      s.setRequestHandler('resources/subscribe', async (req, ctx) => {
        // Forwarded every time (subscribing twice is harmless), so a failed first attempt leaves nothing half-done.
        await c.subscribeResource(req.params, opts(ctx));
        this.#subscribersOf(req.params.uri).add(server);
        return {};
      });
      s.setRequestHandler('resources/unsubscribe', async (req, ctx) => {
        if (this.#leave(server, req.params.uri)) await c.unsubscribeResource(req.params, opts(ctx));
        return {};
      });
    }
    s.setNotificationHandler('notifications/roots/list_changed', () => {
      void c.sendRootsListChanged().catch(() => undefined);
    });
    this.#servers.add(server);
    return () => {
      this.#servers.delete(server);
      for (const uri of [...this.#subscribers.keys()]) {
        if (this.#leave(server, uri)) void c.unsubscribeResource({ uri }).catch(() => undefined);
      }
    };
  }

  #subscribersOf(uri: string): Set<Subscriber> {
    let set = this.#subscribers.get(uri);
    if (!set) this.#subscribers.set(uri, (set = new Set()));
    return set;
  }

  /** Drops `subscriber`'s subscription to `uri`; true when it was the last one (the upstream may unsubscribe). */
  #leave(subscriber: Subscriber, uri: string): boolean {
    const set = this.#subscribers.get(uri);
    if (!set?.delete(subscriber) || set.size > 0) return false;
    this.#subscribers.delete(uri);
    return true;
  }

  async #callTool(params: Parameters<Client['callTool']>[0], ctx: ServerContext, server: McpServer, inRounds: boolean) {
    // No tasks are offered (the SDK has no runtime for them), so a call
    // augmented with one is served as a plain call, as the spec asks of a
    // receiver without task support; passed on, it would start a task
    // upstream whose answer is no tools/call result.
    const { task: _task, ...plain } = params as typeof params & { task?: unknown };
    try {
      if (!inRounds) {
        return await this.#asks.tracked({ asker: ctx, server }, () =>
          this.#forwardCall(plain, ctx.mcpReq.signal, { round: ctx }),
        );
      }
      return await this.#rounds.serve(plain, ctx, (call) =>
        this.#asks.tracked({ asker: call.asker }, () => this.#forwardCall(plain, call.signal, call)),
      );
    } catch (error) {
      // The signal also fires once a call is over; only a call it cut short was cancelled.
      if (ctx.mcpReq.signal.aborted) this.#onCancelled?.(params.name);
      throw error;
    }
  }

  /**
   * Calls the tool upstream, relaying its progress to the client request
   * `to.round` names at the time (each round of a call in rounds is a request
   * of its own; between rounds, none), when the first asked for progress.
   * `to.relaying` is told of the relays still pending, which a round's
   * `input_required` answer waits for as the result does here.
   */
  async #forwardCall(params: Parameters<Client['callTool']>[0], signal: AbortSignal, to: RelayTarget) {
    if (to.round?.mcpReq._meta?.progressToken === undefined) {
      return this.#client.callTool(params, { signal, timeout: UPSTREAM_TIMEOUT_MS });
    }
    // Our own upstream token, relayed from the transport in arrival order; one
    // tail promise keeps relays ordered without an unbounded list.
    const token = `switchyard-${++this.#progressSeq}`;
    let relayed: Promise<void> = Promise.resolve();
    this.#relays.set(token, (p) => {
      const ctx = to.round;
      const downstream = ctx?.mcpReq._meta?.progressToken;
      if (!ctx || downstream === undefined) return;
      relayed = relayed.then(() =>
        ctx.mcpReq
          .notify({ method: 'notifications/progress', params: { ...p, progressToken: downstream } })
          .catch(() => undefined),
      );
      to.relaying?.(relayed);
    });
    try {
      const result = await this.#client.callTool(
        { ...params, _meta: { ...params._meta, progressToken: token } },
        { signal, timeout: UPSTREAM_TIMEOUT_MS },
      );
      await relayed;
      return result;
    } finally {
      this.#relays.delete(token);
    }
  }

  async destroy(): Promise<void> {
    if (this.#destroyed) return;
    this.#destroyed = true;
    this.#rounds.close();
    this.#servers.clear();
    this.#subscribers.clear();
    await this.#client.close().catch(() => undefined);
    await this.#cleanup();
  }
}
