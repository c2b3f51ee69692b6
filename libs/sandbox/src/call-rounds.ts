import { randomBytes } from 'node:crypto';
import { isDeepStrictEqual } from 'node:util';
import {
  CLIENT_CAPABILITIES_META_KEY,
  ProtocolError,
  ProtocolErrorCode,
  inputRequired,
  type CallToolResult,
  type ClientCapabilities,
  type InputRequests,
  type InputRequiredResult,
  type ServerContext,
} from '@modelcontextprotocol/server';
import type { Clock, Timer } from '@switchyard/clock';
import { IDENTITY_HEADERS } from '@switchyard/protocol';

/** The first protocol revision whose requests take their client's input in rounds (`input_required`). */
const FIRST_ROUNDS_VERSION = '2026-07-28';

/** Calls of one sandbox that may wait between rounds for their clients at once; past it, their asks are refused. */
export const CALLS_BETWEEN_ROUNDS_PER_SANDBOX_MAX = 32;
/** Requests for input one call may have unanswered at once; past it, the upstream's next one is refused. */
const ASKS_PER_CALL_MAX = 16;

/** True when a server serves a protocol revision without server→client requests (2026-07-28 on). */
export function takesInputInRounds(version: string | undefined): boolean {
  return version !== undefined && version >= FIRST_ROUNDS_VERSION;
}

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
type CallParams = { readonly name: string; readonly arguments?: unknown };
type Outcome = { readonly result: CallToolResult } | { readonly error: unknown };
interface Pending {
  readonly request: { readonly method: string; readonly params?: Record<string, unknown> };
  readonly resolve: (response: unknown) => void;
  readonly reject: (error: Error) => void;
}

/**
 * The upstream tool calls of 2026-07-28 clients in one sandbox. Such a
 * client takes no server→client request, so what the upstream asks during
 * a call ends the call's round with `input_required`: the upstream's
 * requests, embedded, and a `requestState` issued here (128 random bits,
 * new each round, known to this sandbox only, good for the principal that
 * made the call only: a sandbox may serve several). The upstream call stays
 * open meanwhile; the client's retry of the call with that state and its
 * `inputResponses` answers the upstream's requests and is the next round,
 * which waits for the upstream's result or its next request.
 *
 * Bounds: a call waits `waitMs` between rounds for its client's retry,
 * then the upstream's requests are answered with an error and the call is
 * cancelled upstream (its state is then unknown: -32602); at most
 * {@link CALLS_BETWEEN_ROUNDS_PER_SANDBOX_MAX} calls wait between rounds,
 * past which an upstream's request is refused as one of a legacy client
 * without the capability is. Not guaranteed: a call outlives its sandbox
 * (the class's `expireSeconds` after its last request) or the bound on
 * the upstream call as a whole.
 */
export class CallRounds {
  readonly #clock: Clock;
  readonly #waitMs: number;
  readonly #paused = new Map<string, RoundCall>();
  #closed = false;

  constructor(clock: Clock, waitMs: number) {
    this.#clock = clock;
    this.#waitMs = waitMs;
  }

  /**
   * Serves one round of a call: a first round (no `requestState`) starts
   * the upstream call with `start`; a retry resumes the call its state names.
   * Answers the call's result, or `input_required`. A round its client
   * cancels cancels the call.
   */
  async serve(
    params: CallParams,
    ctx: ServerContext,
    start: (call: RoundCall) => Promise<CallToolResult>,
  ): Promise<CallToolResult | InputRequiredResult> {
    const call = this.#callOf(params, ctx, start);
    call.begin(ctx);
    try {
      for (;;) {
        try {
          await call.next(ctx.mcpReq.signal);
          // An input_required answer, as a result does, waits for the progress relayed before it: the modern era drops what follows.
          await call.relayed;
          ctx.mcpReq.signal.throwIfAborted();
        } catch (cancelled) {
          call.abandon(new Error('its client cancelled the call'));
          throw cancelled;
        }
        const { outcome } = call;
        if (outcome) {
          if ('error' in outcome) throw outcome.error;
          return outcome.result;
        }
        // Every request withdrawn by the upstream as soon as asked: nothing to ask the client for.
        if (!call.asks) continue;
        // Closed, the upstream is going too: its call fails of that soon.
        if (this.#closed) call.refuse('its sandbox was destroyed');
        else if (this.#paused.size < CALLS_BETWEEN_ROUNDS_PER_SANDBOX_MAX) return this.#pause(call);
        else
          call.refuse(
            `${CALLS_BETWEEN_ROUNDS_PER_SANDBOX_MAX} calls of this sandbox already wait for their clients' input`,
          );
      }
    } finally {
      call.end();
    }
  }

  /** Abandons every call between rounds (the sandbox goes); calls in a round end with their upstream. Idempotent. */
  close(): void {
    this.#closed = true;
    for (const call of this.#paused.values()) {
      call.timer?.cancel();
      call.abandon(new Error('its sandbox was destroyed'));
    }
    this.#paused.clear();
  }

  #callOf(params: CallParams, ctx: ServerContext, start: (call: RoundCall) => Promise<CallToolResult>): RoundCall {
    const state = ctx.mcpReq.requestState();
    if (state === undefined) return new RoundCall(params, ctx, start);
    const call = typeof state === 'string' ? this.#paused.get(state) : undefined;
    // Another principal's call is answered as one that does not exist (as a session is), and left waiting for its own.
    if (!call || call.principal !== principalOf(ctx)) {
      throw invalidState(
        `no call of this sandbox waits on it (none was paused with it here, or its client took longer than ${this.#waitMs / 1000} s to retry)`,
      );
    }
    // Left waiting: a mistaken retry does not cost the call its client.
    if (!call.isFor(params)) throw invalidState('it was issued for a call of another tool or other arguments');
    this.#paused.delete(state as string);
    call.timer?.cancel();
    call.answer(ctx.mcpReq.inputResponses);
    return call;
  }

  #pause(call: RoundCall): InputRequiredResult {
    const requestState = randomBytes(16).toString('base64url');
    this.#paused.set(requestState, call);
    call.timer = this.#clock.setTimeout(() => {
      if (this.#paused.get(requestState) !== call) return;
      this.#paused.delete(requestState);
      call.abandon(new Error(`its client did not retry within ${this.#waitMs / 1000} s`));
    }, this.#waitMs);
    return inputRequired({ inputRequests: call.inputRequests(), requestState });
  }
}

/** Who made a request: the `X-Switchyard-Principal` a gateway sets, undefined without authentication. */
function principalOf(ctx: ServerContext): string | undefined {
  return ctx.http?.req?.headers.get(IDENTITY_HEADERS.principal) ?? undefined;
}

/**
 * A request that names no process (no `X-Switchyard-Process`) is served by a
 * sandbox of its own, ended with the request: a retry could reach no call.
 */
function namesProcess(ctx: ServerContext): boolean {
  return ctx.http?.req?.headers.has(IDENTITY_HEADERS.process) ?? true;
}

/** The SDK's own refusal of a state it cannot use (-32602), with why. */
function invalidState(why: string): ProtocolError {
  return new ProtocolError(ProtocolErrorCode.InvalidParams, `Invalid or expired requestState: ${why}`, {
    reason: 'invalid_request_state',
  });
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
