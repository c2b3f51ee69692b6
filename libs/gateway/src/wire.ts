import type { ServerResponse } from 'node:http';
import { ERROR_CODES, SwitchyardError, jsonRpcError } from '@switchyard/protocol';
import type { ErrorCode, JsonRpcErrorBody, JsonRpcId } from '@switchyard/protocol';
import { UnschedulableError } from './scheduler-client.ts';

/**
 * Protocol revisions the gateway passes through; anything else in
 * `MCP-Protocol-Version` is a 400. The two 2024 revisions predate the
 * header, but the runtime's MCP SDK still agrees to them in `initialize`
 * when a client asks for one, and that client then names it on every later
 * request: refused here, its session would open and then fail.
 */
export const SUPPORTED_PROTOCOL_VERSIONS: ReadonlySet<string> = new Set([
  '2024-10-07',
  '2024-11-05',
  '2025-03-26',
  '2025-06-18',
  '2025-11-25',
  '2026-07-28',
]);

/**
 * A protocol version the gateway does not pass, in `MCP-Protocol-Version` or
 * claimed in the body. Answered as MCP 2026-07-28 and the runtime's SDK
 * answer it (-32022, listing the revisions passed), whatever the revision
 * asked: a client that offered a later one first then retries with one of
 * the list, where a bare refusal would make it fall back to a legacy session
 * or give up.
 */
export class UnsupportedVersionError extends SwitchyardError {
  readonly requested: string;
  constructor(message: string, requested: string) {
    super('unsupported_protocol_version', message);
    this.requested = requested;
  }
}

/** The stateless revision: no sessions, routed per request. */
export const STATELESS_PROTOCOL_VERSION = '2026-07-28';

/** Where SDK v2 clients put a modern request's protocol version claim. */
const PROTOCOL_VERSION_META_KEY = 'io.modelcontextprotocol/protocolVersion';

/** What routing needs from a POST body; parsed once, never trusted further. */
export interface MessageInfo {
  /** Id of a single request, for error bodies; null otherwise. */
  readonly id: JsonRpcId;
  /** Method of a single message, or of the first request of a batch. */
  readonly method?: string;
  readonly isInitialize: boolean;
  /**
   * Some message of it is a request (a method and an id): false for a body of
   * answers and notifications only, such as a client's answer to a sampling
   * request or a `notifications/cancelled`.
   */
  readonly asks: boolean;
  /** Protocol version claimed inside the body (`params._meta`), if any. */
  readonly claimedVersion?: string;
  /** The tools its `tools/call` messages name (`params.name`), every one of a batch; read only when asked. */
  readonly toolNames?: readonly string[];
}

function asId(value: unknown): JsonRpcId {
  return typeof value === 'string' || (typeof value === 'number' && Number.isFinite(value)) ? value : null;
}

interface Message {
  id: JsonRpcId;
  method: string | undefined;
  asks: boolean;
  claimed: string | undefined;
  tool: string | undefined;
}

const NO_MESSAGE: Message = Object.freeze({
  id: null,
  method: undefined,
  asks: false,
  claimed: undefined,
  tool: undefined,
});

function recordOf(value: unknown): Record<string, unknown> | undefined {
  return typeof value === 'object' && value !== null ? (value as Record<string, unknown>) : undefined;
}

// Absent parts as undefined, in one shape, rather than spread in: this runs on every POST.
function messageOf(value: unknown, withTool: boolean): Message {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return NO_MESSAGE;
  const m = value as Record<string, unknown>;
  const method = typeof m.method === 'string' ? m.method : undefined;
  const params = recordOf(m.params);
  const claimed = recordOf(params?._meta)?.[PROTOCOL_VERSION_META_KEY];
  return {
    // A response's id is the other side's request id: an error naming it would answer a request it never sent.
    id: method !== undefined ? asId(m.id) : null,
    method,
    // Any id, even one the SDK will refuse: only a body that asks nothing is let past the concurrency limit.
    asks: method !== undefined && m.id !== undefined,
    claimed: typeof claimed === 'string' ? claimed : undefined,
    // A name that is no string calls no tool: a runtime's SDK refuses the call.
    tool: withTool && method === 'tools/call' && typeof params?.name === 'string' ? params.name : undefined,
  };
}

function toolNamesOf(messages: readonly Message[]): readonly string[] {
  return messages.flatMap((m) => (m.tool === undefined ? [] : [m.tool]));
}

/**
 * Reads routing facts from a JSON body, and the tools it calls when
 * `withToolNames` (auth.toolScopes: a gateway without it spends nothing on
 * them). Throws SwitchyardError('parse_error') for bytes that are not JSON
 * and ('invalid_request') for JSON that is not a message or a non-empty
 * batch.
 */
export function inspectBody(body: Buffer, withToolNames = false): MessageInfo {
  let parsed: unknown;
  try {
    parsed = JSON.parse(body.toString('utf8'));
  } catch (cause) {
    throw new SwitchyardError('parse_error', 'Parse error: the body is not valid JSON', { cause });
  }
  if (Array.isArray(parsed)) {
    if (parsed.length === 0) throw new SwitchyardError('invalid_request', 'Invalid request: empty batch');
    const messages = parsed.map((m) => messageOf(m, withToolNames));
    // The 2025-03-26 revision, the one that has batches, forbids this; refused before anything is scheduled.
    if (messages.some((m) => m.method === 'initialize')) {
      throw new SwitchyardError('invalid_request', 'Invalid request: initialize must not be part of a JSON-RPC batch');
    }
    const first = messages.find((m) => m.method !== undefined);
    return {
      id: null,
      method: first?.method,
      isInitialize: false,
      asks: messages.some((m) => m.asks),
      claimedVersion: first?.claimed,
      toolNames: withToolNames ? toolNamesOf(messages) : undefined,
    };
  }
  if (typeof parsed !== 'object' || parsed === null) {
    throw new SwitchyardError('invalid_request', 'Invalid request: expected a JSON-RPC message');
  }
  const m = messageOf(parsed, withToolNames);
  return {
    id: m.id,
    method: m.method,
    isInitialize: m.method === 'initialize',
    asks: m.asks,
    claimedVersion: m.claimed,
    toolNames: withToolNames ? toolNamesOf([m]) : undefined,
  };
}

/**
 * Answers with a JSON-RPC error body and the registry's status for `code`.
 * Does nothing once headers are out: the stream is then cut instead.
 */
export function sendError(
  res: ServerResponse,
  code: ErrorCode,
  message: string,
  id: JsonRpcId = null,
  extraHeaders: Readonly<Record<string, string>> = {},
): void {
  writeError(res, ERROR_CODES[code].status, jsonRpcError(code, message, id), extraHeaders);
}

function writeError(
  res: ServerResponse,
  status: number,
  error: JsonRpcErrorBody,
  extraHeaders: Readonly<Record<string, string>>,
): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  const body = JSON.stringify(error);
  for (const [name, value] of Object.entries(extraHeaders)) res.setHeader(name, value);
  res.statusCode = status;
  res.setHeader('content-type', 'application/json; charset=utf-8');
  res.setHeader('content-length', Buffer.byteLength(body));
  res.end(body);
}

/**
 * Failures that pass soon: a client may send the same request again, after
 * `Retry-After` (a principal at its concurrency limit, every runtime full or
 * draining, no scheduler answering, this gateway shutting down).
 */
const RETRY_AFTER_SECONDS: Partial<Record<ErrorCode, string>> = {
  too_many_requests: '1',
  capacity_exhausted: '1',
  unschedulable: '1',
  not_ready: '1',
};

/**
 * Unschedulable reasons that do not pass as runtimes free up. No runtime
 * serving the class (`no_runtime_for_class`) passes only when one joins:
 * within seconds when the class's only runtime restarts, never for a class
 * nobody serves (a misspelt class, a `defaultClass` no runtime serves). The
 * gateway cannot tell the two apart, so it asks for a longer pause than for
 * a busy fleet: a client stuck on a wrong class asks a tenth as often (each
 * ask is an unschedulable warning in a scheduler's log), one that waits out
 * a restart waits a few seconds more.
 */
const RETRY_AFTER_SECONDS_BY_REASON: Readonly<Record<string, string>> = {
  no_runtime_for_class: '10',
};

function retryAfterOf(error: SwitchyardError): string | undefined {
  const reason = error instanceof UnschedulableError ? error.reason : undefined;
  const byReason = reason !== undefined && Object.hasOwn(RETRY_AFTER_SECONDS_BY_REASON, reason);
  return byReason ? RETRY_AFTER_SECONDS_BY_REASON[reason] : RETRY_AFTER_SECONDS[error.code];
}

/** Maps any thrown value to a response; unknown failures are 500 -32603, never blamed on the client. */
export function sendFailure(res: ServerResponse, error: unknown, id: JsonRpcId = null): void {
  if (error instanceof UnsupportedVersionError) {
    const versions = { supported: [...SUPPORTED_PROTOCOL_VERSIONS], requested: error.requested };
    writeError(res, error.status, jsonRpcError(error.code, error.message, id, versions), {});
    return;
  }
  if (error instanceof SwitchyardError) {
    const headers: Record<string, string> = error.code === 'method_not_allowed' ? { Allow: 'POST' } : {};
    const retryAfter = retryAfterOf(error);
    if (retryAfter !== undefined) headers['Retry-After'] = retryAfter;
    sendError(res, error.code, error.message, id, headers);
    return;
  }
  sendError(res, 'internal', 'Internal error', id);
}
