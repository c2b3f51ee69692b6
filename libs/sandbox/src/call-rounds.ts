import { randomBytes } from 'node:crypto';
import {
  ProtocolError,
  ProtocolErrorCode,
  inputRequired,
  type CallToolResult,
  type InputRequiredResult,
  type ServerContext,
} from '@modelcontextprotocol/server';
import type { Clock } from '@switchyard/clock';
import { RoundCall, principalOf, type CallParams } from './round-call.ts';

/** The first protocol revision whose requests take their client's input in rounds (`input_required`). */
const FIRST_ROUNDS_VERSION = '2026-07-28';

/** Calls of one sandbox that may wait between rounds for their clients at once; past it, their asks are refused. */
export const CALLS_BETWEEN_ROUNDS_PER_SANDBOX_MAX = 32;

/** True when a server serves a protocol revision without server→client requests (2026-07-28 on). */
export function takesInputInRounds(version: string | undefined): boolean {
  return version !== undefined && version >= FIRST_ROUNDS_VERSION;
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

/** The SDK's own refusal of a state it cannot use (-32602), with why. */
function invalidState(why: string): ProtocolError {
  return new ProtocolError(ProtocolErrorCode.InvalidParams, `Invalid or expired requestState: ${why}`, {
    reason: 'invalid_request_state',
  });
}
