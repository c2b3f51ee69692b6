import type { ServerResponse } from 'node:http';
import { sleep } from '@switchyard/clock';
import type { Clock } from '@switchyard/clock';
import { PROXY_ERRORS, PROXY_ERROR_HEADER } from '@switchyard/protocol';
import type { Dispatch } from './http2-streams.ts';
import { GATEWAY_DEFAULTS } from './options.ts';
import { exchange, upstreamFailure } from './exchange.ts';
import type { UpstreamCall, UpstreamResponse } from './exchange.ts';
import { isConnectFailure } from './upstream.ts';

/** What became of one attempt at a runtime. */
export type Attempt =
  | {
      readonly kind: 'response';
      readonly upstream: UpstreamResponse;
      /**
       * Carried by a relay connection: the answer is the runtime's alone, as
       * the scheduler said all it had to (its refusals too) on the upgrade.
       */
      readonly relayed?: true;
    }
  /** The request never left: safe to send elsewhere. */
  | { readonly kind: 'unreachable'; readonly error: unknown }
  /**
   * The runtime or its tunnel is gone (404 from the runtime, 502 from the
   * proxy); body discarded. `notConnected`: the scheduler replica asked
   * holds no tunnel of the runtime (which may have moved to another).
   * `said`: the message of the runtime's own JSON-RPC error, when the
   * runtime answered (`sandbox "p1" could not start`), not a proxy.
   */
  | { readonly kind: 'gone'; readonly status: number; readonly notConnected?: true; readonly said?: string };

/** What of a runtime's error message the client is told, at most. */
const SAID_CHARS_MAX = 200;

/**
 * Dials the runtime, once more after GATEWAY_DEFAULTS.dialRetryDelayMs when
 * the connection could not be made (no byte was written, so nothing is
 * replayed). Errors after the request left are rethrown: they are never
 * retried. A scheduler proxy's 502 saying the runtime reset the stream is
 * one of them, an upstream failure as a reset connection is in direct mode:
 * the runtime is still there and may have acted on the request.
 */
export async function attempt(
  dispatcher: Dispatch,
  clock: Clock,
  call: UpstreamCall,
  res: ServerResponse,
  goneStatuses: ReadonlySet<number>,
): Promise<Attempt> {
  for (let dial = 0; ; dial++) {
    try {
      const upstream = await exchange(dispatcher, call, res);
      if (goneStatuses.has(upstream.statusCode)) {
        const notConnected = upstream.headers[PROXY_ERROR_HEADER] === PROXY_ERRORS.notConnected;
        const body = await upstream.discard();
        if (upstream.statusCode === 502 && proxyErrorOf(body) === PROXY_ERRORS.streamFailed) {
          throw upstreamFailure(new Error('the runtime reset the stream behind the scheduler proxy'));
        }
        // A proxy marks its own refusals, and strips the mark from what runtimes answer.
        const said = upstream.headers[PROXY_ERROR_HEADER] === undefined ? rpcErrorOf(body) : undefined;
        return {
          kind: 'gone',
          status: upstream.statusCode,
          ...(notConnected ? { notConnected } : {}),
          ...(said ? { said } : {}),
        };
      }
      return { kind: 'response', upstream };
    } catch (error) {
      if (!isConnectFailure(error) || call.signal.aborted) throw error;
      if (dial >= 1) return { kind: 'unreachable', error };
      await sleep(clock, GATEWAY_DEFAULTS.dialRetryDelayMs, call.signal);
    }
  }
}

/** The message of a JSON-RPC error body, cut to SAID_CHARS_MAX, if that is what it is. */
function rpcErrorOf(body: Buffer): string | undefined {
  try {
    const { error } = (JSON.parse(body.toString('utf8')) as { error?: { message?: unknown } } | null) ?? {};
    return typeof error?.message === 'string' ? error.message.slice(0, SAID_CHARS_MAX) : undefined;
  } catch {
    return undefined;
  }
}

/** The `error` of a scheduler proxy's 502 body `{"error","runtime"}`, if that is what it is. */
function proxyErrorOf(body: Buffer): unknown {
  try {
    return (JSON.parse(body.toString('utf8')) as { error?: unknown } | null)?.error;
  } catch {
    return undefined;
  }
}
