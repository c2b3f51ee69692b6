/**
 * The one registry of error codes: each maps to an HTTP status and a JSON-RPC
 * error code. Typed local errors carry a code from here; the wire carries a
 * JSON-RPC error body. A table test locks the mapping.
 */
export const ERROR_CODES = {
  parse_error: { status: 400, rpc: -32700 },
  invalid_request: { status: 400, rpc: -32600 },
  invalid_params: { status: 400, rpc: -32602 },
  bad_identity: { status: 400, rpc: -32600 },
  session_required: { status: 400, rpc: -32000 },
  // MCP 2026-07-28's UnsupportedProtocolVersion, which the runtime's SDK answers too.
  unsupported_protocol_version: { status: 400, rpc: -32022 },
  unauthorized: { status: 401, rpc: -32001 },
  forbidden: { status: 403, rpc: -32000 },
  session_not_found: { status: 404, rpc: -32001 },
  runtime_not_found: { status: 404, rpc: -32001 },
  not_found: { status: 404, rpc: -32601 },
  method_not_allowed: { status: 405, rpc: -32000 },
  // Accept without the media types the answer comes in (MCP Streamable HTTP wants JSON and SSE).
  not_acceptable: { status: 406, rpc: -32000 },
  // A request body still arriving at the deadline (a client trickling it).
  request_timeout: { status: 408, rpc: -32000 },
  conflict: { status: 409, rpc: -32000 },
  body_too_large: { status: 413, rpc: -32000 },
  unsupported_media_type: { status: 415, rpc: -32000 },
  too_many_requests: { status: 429, rpc: -32000 },
  header_too_large: { status: 431, rpc: -32600 },
  internal: { status: 500, rpc: -32603 },
  upstream_unavailable: { status: 502, rpc: -32000 },
  unschedulable: { status: 503, rpc: -32000 },
  capacity_exhausted: { status: 503, rpc: -32000 },
  not_ready: { status: 503, rpc: -32000 },
  upstream_timeout: { status: 504, rpc: -32000 },
} as const satisfies Record<string, { status: number; rpc: number }>;

export type ErrorCode = keyof typeof ERROR_CODES;

/** A local failure with a registry code; `status` follows from the code. */
export class SwitchyardError extends Error {
  readonly code: ErrorCode;
  constructor(code: ErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'SwitchyardError';
    this.code = code;
  }
  get status(): number {
    return ERROR_CODES[this.code].status;
  }
}

export type JsonRpcId = string | number | null;

/**
 * What MCP 2026-07-28 asks an `unsupported_protocol_version` refusal to
 * carry: the revisions served, so that a client can pick one and retry, and
 * the one it asked for.
 */
export interface UnsupportedVersionData {
  readonly supported: readonly string[];
  readonly requested: string;
}

/** JSON-RPC 2.0 error response body for a registry code. */
export interface JsonRpcErrorBody {
  readonly jsonrpc: '2.0';
  readonly id: JsonRpcId;
  readonly error: {
    readonly code: number;
    readonly message: string;
    readonly data?: { readonly reason: ErrorCode } & Partial<UnsupportedVersionData>;
  };
}

/** The body for `code`; `versions` only for `unsupported_protocol_version`, whose data the spec defines. */
export function jsonRpcError(
  code: ErrorCode,
  message: string,
  id: JsonRpcId = null,
  versions?: UnsupportedVersionData,
): JsonRpcErrorBody {
  const extra = code === 'unsupported_protocol_version' && versions ? versions : {};
  return { jsonrpc: '2.0', id, error: { code: ERROR_CODES[code].rpc, message, data: { reason: code, ...extra } } };
}

/** HTTP status for any thrown value: registry errors keep theirs, anything else is internal (never blamed on the client). */
export function statusOf(error: unknown): number {
  return error instanceof SwitchyardError ? error.status : ERROR_CODES.internal.status;
}
