import {
  McpServer,
  ProtocolError,
  ProtocolErrorCode,
  isInputRequiredResult,
  type ServerCapabilities,
  type ServerContext,
} from '@modelcontextprotocol/server';
import type { Clock } from '@switchyard/clock';
import type { RoundStarts } from './round-starts.ts';

/**
 * How a tool call ended: `ok`, a result; `error`, a result with `isError`
 * (a tool's failure, arguments its schema refused) or a JSON-RPC error (a
 * tool the sandbox lacks, an upstream's error, its timeout, its connection
 * lost); `cancelled`, its client cancelled it before it settled.
 */
export type ToolCallOutcome = 'ok' | 'error' | 'cancelled';

/** Every {@link ToolCallOutcome}: a fixed set, so a label of them stays bounded. */
export const TOOL_CALL_OUTCOMES: readonly ToolCallOutcome[] = ['ok', 'error', 'cancelled'];

/**
 * Told once of each `tools/call` a sandbox served, with its class, its
 * outcome and its seconds from its handler's start to its settling. A call
 * of several rounds (a tool that asks its client for input) is told once,
 * as its last round settles, timed from its first (see RoundStarts). Runs on
 * every call: must not throw, block or allocate more than it must.
 */
export type ToolCallSink = (className: string, outcome: ToolCallOutcome, seconds: number) => void;

/** Where and on which clock the calls of a host are counted. */
export interface ToolCallCounting {
  readonly clock: Clock;
  readonly sink: ToolCallSink;
  /** The starts of the 2026-07-28 calls between rounds, host-wide: each round is a request of its own. */
  readonly rounds: RoundStarts;
}

type Handler = (request: unknown, ctx: ServerContext) => unknown;

/**
 * An SDK server whose tool calls are counted for a sandbox of `className`:
 * whichever `tools/call` handler is set on it is wrapped, the McpServer's
 * own (builtin and custom tools, as the first is registered) or a proxy's
 * forwarding one. The servers built here are the one place every engine,
 * both protocol generations and REST calls go through, so each call is
 * counted once. The count is taken around the SDK's own checks of the call
 * (its request, its result against the wire schema), so it tells what the
 * client is answered: a result the SDK refuses reaches the client as a
 * JSON-RPC error and is counted `error`, as is a malformed `tools/call`.
 * Clients see it as a plain McpServer: one that declares `tools` answers
 * `tools/list` (empty until a tool is installed) from the start.
 */
export function countingServer(
  info: { name: string; version: string },
  capabilities: ServerCapabilities,
  className: string,
  counting: ToolCallCounting,
): McpServer {
  // Told of tools in its constructor, McpServer sets its handlers there, before any wrapping: told after,
  // it sets them as the first tool is registered, through the setter wrapped below.
  const { tools, ...others } = capabilities;
  const server = new McpServer(info, { capabilities: others });
  countToolCalls(server, className, counting);
  if (tools) {
    server.server.registerCapabilities({ tools });
    // A server that declares tools answers tools/list before it has any (an empty list, not -32601), as one
    // told of them in its constructor does: a first tool, at once removed, has the handlers set now.
    server.registerTool(HANDLERS_SET_BY, {}, () => ({ content: [] })).remove();
  }
  return server;
}

/** The name of the tool that only sets the tool handlers of a counting server; never listed (removed at once). */
const HANDLERS_SET_BY = 'switchyard-tool-handlers';

/**
 * Wraps what the SDK server stores for `tools/call`: its `_wrapHandler` hook (which every registration goes
 * through, whatever its form) checks the request, runs the handler and checks its result; a wrapper around
 * the handler alone would count as `ok` a result that check then turns into a JSON-RPC error.
 */
function countToolCalls(server: McpServer, className: string, counting: ToolCallCounting): void {
  const inner = server.server as unknown as { _wrapHandler?: (method: string, handler: Handler) => Handler };
  const wrap = inner._wrapHandler?.bind(inner);
  if (!wrap) throw new Error('the SDK server has no _wrapHandler hook: tool calls cannot be counted');
  inner._wrapHandler = (method, handler) => {
    const checked = wrap(method, handler);
    return method === 'tools/call' ? counted(checked, className, counting) : checked;
  };
}

function counted(handler: Handler, className: string, { clock, sink, rounds }: ToolCallCounting): Handler {
  return async (request, ctx) => {
    // The state as its client echoed it (the SDK takes it out of the request's params).
    const state = ctx.mcpReq.requestState();
    const startMs = rounds.resume(className, state) ?? clock.monotonicNow();
    let outcome: ToolCallOutcome | undefined = 'error';
    try {
      const result = await Promise.resolve(handler(request, ctx)).catch((error: unknown) => {
        // A retry refused for its state (another tool, arguments or principal) may leave the call it names
        // waiting: the call keeps its start for the retry that resumes it.
        if (typeof state === 'string' && refusedState(error)) rounds.pause(className, state, startMs);
        throw error;
      });
      if (isInputRequiredResult(result)) {
        // Not settled: the client retries the call with the input asked for, as a request of its own.
        outcome = undefined;
        if (typeof result.requestState === 'string') rounds.pause(className, result.requestState, startMs);
      } else if ((result as { isError?: unknown } | undefined)?.isError !== true) outcome = 'ok';
      return result;
    } finally {
      // Read as the call settles: the signal also fires once a call is over ("Connection closed").
      if (outcome !== undefined) {
        if (ctx.mcpReq.signal.aborted) outcome = 'cancelled';
        sink(className, outcome, (clock.monotonicNow() - startMs) / 1000);
      }
    }
  };
}

/** The SDK's refusal of a round's `requestState` (-32602, `invalid_request_state`), which a handler may throw too. */
function refusedState(error: unknown): boolean {
  return (
    error instanceof ProtocolError &&
    error.code === ProtocolErrorCode.InvalidParams &&
    (error.data as { reason?: unknown } | undefined)?.reason === 'invalid_request_state'
  );
}
