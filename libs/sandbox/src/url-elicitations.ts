import type { McpServer } from '@modelcontextprotocol/server';
import type { Call } from './upstream-asks.ts';

/** URL-mode elicitations remembered per sandbox for their completion; past it, the oldest is forgotten. */
const URL_ELICITATIONS_MAX = 64;

/**
 * The URL-mode elicitations (2025-11-25) an upstream sent to legacy
 * clients, by their `elicitationId`, so that its later
 * `notifications/elicitation/complete` reaches the client it asked, and
 * only that one (as the spec has a server send it). Sent on the call that
 * asked while it runs (awaited before the call's result, which ends that
 * stream), else on the session's GET stream. One for an id never asked,
 * forgotten or already completed is dropped (a client ignores those), as
 * is any toward a 2026-07-28 client: that revision has no such notification.
 */
export class UrlElicitations {
  readonly #asked = new Map<string, Call>();
  readonly #servers: Iterable<McpServer>;
  readonly #sending = new WeakMap<Call, Promise<unknown>>();

  /** `servers`: the sandbox's servers, live: a session gone since it was asked is not sent to. */
  constructor(servers: Iterable<McpServer>) {
    this.#servers = servers;
  }

  /** Remembers who a URL elicitation (`params` of an elicitation/create) goes to; legacy calls only. */
  asked(params: { mode?: string; elicitationId?: string }, call: Call): void {
    if (params.mode !== 'url' || typeof params.elicitationId !== 'string' || !call.server) return;
    this.#asked.delete(params.elicitationId);
    this.#asked.set(params.elicitationId, call);
    if (this.#asked.size > URL_ELICITATIONS_MAX) this.#asked.delete(this.#asked.keys().next().value!);
  }

  /** Passes the upstream's completion on to the client asked; `running` tells whether its call still does. */
  complete(params: { elicitationId: string }, running: (call: Call) => boolean): void {
    const call = this.#asked.get(params.elicitationId);
    if (!call) return;
    this.#asked.delete(params.elicitationId);
    const { server } = call;
    if (!server?.isConnected() || ![...this.#servers].includes(server)) return;
    const related = running(call) ? { relatedRequestId: call.asker.mcpReq.id } : undefined;
    const notification = { method: 'notifications/elicitation/complete' as const, params };
    const sent = server.server.notification(notification, related).catch(() => undefined);
    if (related) this.#sending.set(call, Promise.all([this.#sending.get(call), sent]));
  }

  /** Settles once the completions sent on `call`'s own stream are written. */
  async sent(call: Call): Promise<void> {
    await this.#sending.get(call);
  }
}
