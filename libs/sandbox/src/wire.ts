import { SwitchyardError, jsonRpcError, statusOf, type ErrorCode, type JsonRpcId } from '@switchyard/protocol';

/** A JSON-RPC error response with the registry's HTTP status. */
export function errorResponse(code: ErrorCode, message: string, id: JsonRpcId = null): Response {
  return Response.json(jsonRpcError(code, message, id), { status: new SwitchyardError(code, message).status });
}

/** Any thrown value as a response; unknown failures are internal, never blamed on the client. */
export function responseForError(error: unknown, id: JsonRpcId = null): Response {
  if (error instanceof SwitchyardError) return errorResponse(error.code, error.message, id);
  return Response.json(jsonRpcError('internal', 'internal error', id), { status: statusOf(error) });
}

/**
 * The id of a single JSON-RPC request body, or null: a posted response's id
 * is one the server chose, and an error naming it would answer a request
 * the client never sent (the transport asks for an error without an id).
 */
export function requestIdOf(body: unknown): JsonRpcId {
  if (body === null || typeof body !== 'object' || Array.isArray(body)) return null;
  const { id, method } = body as { id?: unknown; method?: unknown };
  if (typeof method !== 'string') return null;
  return typeof id === 'string' || typeof id === 'number' ? id : null;
}

/** Parses a JSON body; an unparsable one is the client's `parse_error`. */
export async function readJson(request: Request): Promise<unknown> {
  const text = await request.clone().text();
  if (text.length === 0) throw new SwitchyardError('parse_error', 'empty request body');
  try {
    return JSON.parse(text) as unknown;
  } catch (error) {
    throw new SwitchyardError('parse_error', 'request body is not valid JSON', { cause: error });
  }
}
