import type { Client } from '@modelcontextprotocol/client';
import type { ListRootsResult, McpServer } from '@modelcontextprotocol/server';
import type { Asker } from './round-call.ts';
import { rootsOf, sessionToAsk } from './roots.ts';
import { UrlElicitations } from './url-elicitations.ts';

/**
 * A tool call in flight upstream: whom the upstream's requests go through,
 * and for a legacy call the server of the session or request that made it,
 * which asks its client for roots (a call in rounds embeds the request in
 * its next round instead).
 */
export interface Call {
  readonly asker: Asker;
  readonly server?: McpServer;
}

/**
 * The upstream's own requests (sampling, elicitation, roots), sent to a
 * downstream client. A request names no client request, so it goes on the
 * most recent tool call still running upstream in the sandbox — the one
 * that asked, unless several run at once — over that call's own response
 * stream, or, for a 2026-07-28 client, in the call's next round (see
 * CallRounds). With no call running there is no stream to carry it: refused
 * (roots excepted, see `#listRoots`). A call that had its answer becomes the
 * most recent: it is the likeliest to ask next (a call between rounds,
 * resumed while a later call runs). Each request ends at the client when
 * its call ends or the upstream withdraws it (notifications/cancelled),
 * whichever comes first, and after `timeoutMs` at most.
 */
export class UpstreamAsks {
  /** Tool calls in flight upstream, oldest first. */
  readonly #calls: Call[] = [];
  readonly #servers: Iterable<McpServer>;
  readonly #timeoutMs: number;
  readonly #urls: UrlElicitations;

  /** `servers`: the sandbox's servers, live; one session among them may be asked for roots outside a call. */
  constructor(client: Client, servers: Iterable<McpServer>, timeoutMs: number) {
    this.#servers = servers;
    this.#timeoutMs = timeoutMs;
    this.#urls = new UrlElicitations(servers);
    client.setRequestHandler('sampling/createMessage', (req, upstream) =>
      this.#onBehalf(({ asker }) =>
        asker.mcpReq.requestSampling(req.params, this.#asked(asker, upstream.mcpReq.signal)),
      ),
    );
    client.setRequestHandler('elicitation/create', (req, upstream) =>
      this.#onBehalf((call) => {
        this.#urls.asked(req.params, call);
        return call.asker.mcpReq.elicitInput(req.params, this.#asked(call.asker, upstream.mcpReq.signal));
      }),
    );
    client.setNotificationHandler('notifications/elicitation/complete', (n) =>
      this.#urls.complete(n.params, (call) => this.#calls.includes(call)),
    );
    client.setRequestHandler('roots/list', (_req, upstream) => this.#listRoots(upstream.mcpReq.signal));
  }

  /** Runs an upstream call with `call` among the calls the upstream's requests may go to. */
  async tracked<T>(call: Call, run: () => Promise<T>): Promise<T> {
    this.#calls.push(call);
    try {
      const result = await run();
      // The call's stream ends with its result: what is on its way there goes first.
      await this.#urls.sent(call);
      return result;
    } finally {
      this.#calls.splice(this.#calls.indexOf(call), 1);
    }
  }

  #onBehalf<T>(send: (call: Call) => Promise<T>): Promise<T> {
    const call = this.#calls.at(-1);
    if (!call) return Promise.reject(new Error('no client request in flight to carry this request'));
    return send(call).finally(() => {
      const at = this.#calls.indexOf(call);
      if (at >= 0) this.#calls.push(...this.#calls.splice(at, 1));
    });
  }

  /**
   * Asks a downstream client for its roots, on the call in flight as
   * `#onBehalf` does. With none, a server that asks at start or on a change
   * of roots still reaches the client of a sandbox that one session holds,
   * over its GET stream (refused when it has none open, see `sessionToAsk`).
   */
  async #listRoots(withdrawn: AbortSignal): Promise<ListRootsResult> {
    if (this.#calls.length === 0) {
      return rootsOf(sessionToAsk(this.#servers), { signal: withdrawn, timeout: this.#timeoutMs });
    }
    return this.#onBehalf(({ asker, server }) => {
      const options = this.#asked(asker, withdrawn);
      if (server) return rootsOf(server, options);
      return asker.mcpReq.send({ method: 'roots/list' }, options) as Promise<ListRootsResult>;
    });
  }

  /** Options of a request sent through `asker`'s call: cancelled as the call ends or the upstream withdraws it. */
  #asked(asker: Asker, withdrawn: AbortSignal) {
    const signal = AbortSignal.any([asker.mcpReq.signal, withdrawn]);
    return { relatedRequestId: asker.mcpReq.id, signal, timeout: this.#timeoutMs };
  }
}
