import { isDeepStrictEqual } from 'node:util';
import {
  CLIENT_CAPABILITIES_META_KEY,
  type CallToolResult,
  type ClientCapabilities,
  type InputRequests,
  type ServerContext,
} from '@modelcontextprotocol/server';
import type { Timer } from '@switchyard/clock';
import { IDENTITY_HEADERS } from '@switchyard/protocol';

/** Requests for input one call may have unanswered at once; past it, the upstream's next one is refused. */
const ASKS_PER_CALL_MAX = 16;

/**
 * Whom an upstream's request for input (sampling, elicitation, roots) is
 * sent through: a legacy call's own context, which asks its client over the
 * session, or a call served in rounds, which turns it into the input
 * requests of its next `input_required` round.
 */
export interface Asker {
  readonly mcpReq: Pick<ServerContext['mcpReq'], 'id' | 'signal' | 'requestSampling' | 'elicitInput' | 'send'>;
}

type Params = Record<string, unknown> | undefined;
export type CallParams = { readonly name: string; readonly arguments?: unknown };
type Outcome = { readonly result: CallToolResult } | { readonly error: unknown };
interface Pending {
  readonly request: { readonly method: string; readonly params?: Record<string, unknown> };
  readonly resolve: (response: unknown) => void;
  readonly reject: (error: Error) => void;
}

/** Who made a request: the `X-Switchyard-Principal` a gateway sets, undefined without authentication. */
export function principalOf(ctx: ServerContext): string | undefined {
  return ctx.http?.req?.headers.get(IDENTITY_HEADERS.principal) ?? undefined;
}

/**
 * A request that names no process (no `X-Switchyard-Process`) is served by a
 * sandbox of its own, ended with the request: a retry could reach no call.
 */
function namesProcess(ctx: ServerContext): boolean {
  return ctx.http?.req?.headers.has(IDENTITY_HEADERS.process) ?? true;
}

/** One upstream tool call of a 2026-07-28 client, over as many rounds as its upstream asks for input. */
export class RoundCall {
  readonly asker: Asker;
  /** Who made the call (see principalOf): only they may resume it, as only they reach their session. */
  readonly principal: string | undefined;
  readonly #params: CallParams;
  readonly #abort = new AbortController();
  readonly #pending = new Map<string, Pending>();
  #asked = 0;
  #outcome: Outcome | undefined;
  #wake: (() => void) | undefined;
  #round: ServerContext | undefined;
  #capabilities: ClientCapabilities | undefined;
  #relayed: Promise<void> = Promise.resolve();
  /** The call's sandbox is its first request's own (see namesProcess): it cannot outlive the round. */
  readonly #unnamed: boolean;
  timer: Timer | undefined;

  constructor(params: CallParams, first: ServerContext, start: (call: RoundCall) => Promise<CallToolResult>) {
    this.#params = params;
    this.principal = principalOf(first);
    this.#unnamed = !namesProcess(first);
    const ask = (method: string, params: unknown, options?: { signal?: AbortSignal }): Promise<never> =>
      this.#ask(method, params as Params, options?.signal);
    this.asker = {
      mcpReq: {
        id: first.mcpReq.id,
        signal: this.#abort.signal,
        requestSampling: (params, options) => ask('sampling/createMessage', params, options),
        elicitInput: (params, options) => ask('elicitation/create', params, options),
        send: ((request: { method: string; params?: unknown }, options?: { signal?: AbortSignal }) =>
          ask(request.method, request.params, options)) as never,
      },
    };
    // The first round is in progress as the call starts upstream (its progress is relayed there).
    this.begin(first);
    start(this).then(
      (result) => this.#settle({ result }),
      (error: unknown) => this.#settle({ error }),
    );
  }

  /** Cancels the upstream call: given to it as its signal. */
  get signal(): AbortSignal {
    return this.#abort.signal;
  }

  /** The round in progress, where progress is relayed; none between rounds. */
  get round(): ServerContext | undefined {
    return this.#round;
  }

  /** Settles once the progress relayed to the rounds so far is sent (see `relaying`). */
  get relayed(): Promise<void> {
    return this.#relayed;
  }

  /** Told of the relays of the call's progress still pending, in order: `relays` settles after all of them. */
  relaying(relays: Promise<void>): void {
    this.#relayed = relays;
  }

  get outcome(): Outcome | undefined {
    return this.#outcome;
  }

  /**
   * Makes `round` the round in progress. Its client's capabilities are the
   * ones later requests are checked against, and an unanswered request it
   * no longer declares one for is refused now: asked again, the SDK would
   * refuse the round (-32021) after the call was paused under a state its
   * client never gets.
   */
  begin(round: ServerContext): void {
    this.#round = round;
    const envelope = round.mcpReq.envelope as Record<string, unknown> | undefined;
    this.#capabilities = envelope?.[CLIENT_CAPABILITIES_META_KEY] as ClientCapabilities | undefined;
    for (const [key, { request, reject }] of this.#pending) {
      const lacking = undeclared(request.method, request.params, this.#capabilities);
      if (!lacking) continue;
      this.#pending.delete(key);
      reject(notSupported(lacking, request.method));
    }
  }

  end(): void {
    this.#round = undefined;
  }

  /** The retry of this call repeats its tool and arguments. */
  isFor(params: CallParams): boolean {
    return params.name === this.#params.name && isDeepStrictEqual(params.arguments, this.#params.arguments);
  }

  /** Until the upstream call settles or has a request unanswered; rejects with `signal`'s reason if it aborts first. */
  next(signal: AbortSignal): Promise<void> {
    if (this.#outcome || this.#pending.size > 0) return Promise.resolve();
    return new Promise<void>((resolve, reject) => {
      const onAbort = (): void => {
        this.#wake = undefined;
        reject(signal.reason);
      };
      if (signal.aborted) return onAbort();
      signal.addEventListener('abort', onAbort, { once: true });
      this.#wake = () => {
        this.#wake = undefined;
        signal.removeEventListener('abort', onAbort);
        resolve();
      };
    });
  }

  /** True while the upstream has a request unanswered. */
  get asks(): boolean {
    return this.#pending.size > 0;
  }

  /** The unanswered requests, as the 2026-07-28 round embeds them. */
  inputRequests(): InputRequests {
    return Object.fromEntries([...this.#pending].map(([key, p]) => [key, p.request])) as InputRequests;
  }

  /** Answers the upstream's requests the client's retry has responses for; the others are asked again. */
  answer(responses: Record<string, unknown> | undefined): void {
    for (const [key, pending] of this.#pending) {
      if (responses?.[key] === undefined) continue;
      this.#pending.delete(key);
      pending.resolve(responses[key]);
    }
  }

  /** Answers every unanswered request of the upstream with an error (`why`), as an MCP client refusing it would. */
  refuse(why: string): void {
    for (const pending of this.#pending.values()) pending.reject(new Error(why));
    this.#pending.clear();
  }

  /** The client is gone: its upstream is refused what it asked, then the call is cancelled. */
  abandon(reason: Error): void {
    this.refuse(`the call was abandoned: ${reason.message}`);
    this.#abort.abort(reason);
  }

  #settle(outcome: Outcome): void {
    this.#outcome = outcome;
    this.refuse('the call is over');
    this.#wake?.();
  }

  /** Adds a request to the next round; `withdrawn` (its asker's signal) takes it out of the rounds to come. */
  #ask(method: string, params: Params, withdrawn: AbortSignal | undefined): Promise<never> {
    if (this.#outcome || this.#abort.signal.aborted) return Promise.reject(new Error('the call is over'));
    if (withdrawn?.aborted) return Promise.reject(withdrawn.reason as Error);
    // Refused at once, not paused: the sandbox ends with this request, and with it the call a retry would resume.
    if (this.#unnamed) {
      return Promise.reject(
        new Error(
          `${method} cannot reach a 2026-07-28 client whose call names no process: its sandbox ends with the request; name one (X-Switchyard-Process) to take input in rounds`,
        ),
      );
    }
    const lacking = undeclared(method, params, this.#capabilities);
    if (lacking) return Promise.reject(notSupported(lacking, method));
    if (this.#pending.size >= ASKS_PER_CALL_MAX) {
      return Promise.reject(new Error(`${ASKS_PER_CALL_MAX} requests of this call already wait for their answers`));
    }
    const request = { method, ...(params === undefined ? {} : { params: forRounds(method, params) }) };
    const key = `input-${++this.#asked}`;
    return new Promise<never>((resolve, reject) => {
      const withdraw = (): void => {
        // An answer already given stands: the upstream ignores it, as it would a client's late one.
        if (this.#pending.delete(key)) reject(withdrawn!.reason as Error);
      };
      withdrawn?.addEventListener('abort', withdraw, { once: true });
      const settled = (): void => withdrawn?.removeEventListener('abort', withdraw);
      this.#pending.set(key, {
        request,
        resolve: (response) => (settled(), resolve(response as never)),
        reject: (error) => (settled(), reject(error)),
      });
      this.#wake?.();
    });
  }
}

/**
 * A legacy request's params as a round embeds them: a URL elicitation's
 * `elicitationId` is 2025-11-25's (a 2026-07-28 round has none: the round
 * itself ties the answer to the request).
 */
function forRounds(method: string, params: Record<string, unknown>): Record<string, unknown> {
  if (method !== 'elicitation/create' || params.elicitationId === undefined) return params;
  const { elicitationId: _id, ...rest } = params;
  return rest;
}

/** The refusal of a client that lacks a capability, as the SDK words it. */
function notSupported(lacking: string, method: string): Error {
  return new Error(`Client does not support ${lacking} (required for ${method})`);
}

/**
 * The capability a request needs that the client did not declare on the
 * round's request (the SDK refuses a round that embeds it, -32021, which
 * would leave the upstream's call waiting), or none. The SDK's own rules:
 * a bare `elicitation: {}` declares the form mode.
 */
function undeclared(method: string, params: Params, caps: ClientCapabilities | undefined): string | undefined {
  switch (method) {
    case 'sampling/createMessage': {
      if (!caps?.sampling) return 'sampling';
      const tools = params?.tools !== undefined || params?.toolChoice !== undefined;
      return tools && !caps.sampling.tools ? 'sampling with tools' : undefined;
    }
    case 'elicitation/create': {
      const e = caps?.elicitation;
      if (!e) return 'elicitation';
      if (params?.mode === 'url') return e.url ? undefined : 'URL elicitation';
      return e.form || !e.url ? undefined : 'form elicitation';
    }
    case 'roots/list':
      return caps?.roots ? undefined : 'roots';
    default:
      return method;
  }
}
