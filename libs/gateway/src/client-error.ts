// What a client hears of a request Node's HTTP parser refused before the
// gateway saw it: a header block past the server's maxHeaderSize, bytes that
// are not HTTP, a request not received by the server's deadlines. Node's own
// answers carry a status and no body; MCP clients then report a bare status.
import type { Duplex } from 'node:stream';
import { ERROR_CODES, jsonRpcError } from '@switchyard/protocol';

// Not imported from 'node:http': an ESM import of it loads Node's fetch (see metrics.ts).
const { STATUS_CODES } = process.getBuiltinModule('node:http');

/** The registry codes of the answers below; each is a reason of refusals_total too. */
export type ClientErrorCode = 'header_too_large' | 'body_too_large' | 'request_timeout' | 'invalid_request';

/** Node's parser and server error codes, with the answer Node gives each as a registry code (anything else: 400). */
const REFUSALS: Readonly<Record<string, { code: ClientErrorCode; message: string }>> = {
  HPE_HEADER_OVERFLOW: { code: 'header_too_large', message: 'Request headers too large' },
  HPE_CHUNK_EXTENSIONS_OVERFLOW: { code: 'body_too_large', message: 'Request chunk extensions too large' },
  ERR_HTTP_REQUEST_TIMEOUT: { code: 'request_timeout', message: 'Request not received in time' },
};
const MALFORMED = { code: 'invalid_request', message: 'Bad request: not a valid HTTP request' } as const;
/**
 * The parser's error for a connection its client ended part-way through a
 * request (headers or body): the client went away, nothing was refused.
 * Answered as Node does (a 400), but not counted.
 */
const ENDED_MID_REQUEST = 'HPE_INVALID_EOF_STATE';

/** The whole answer to the connection: Node's status for `code`, a JSON-RPC body, and the connection closed. */
function answerOf(code: ClientErrorCode, message: string): string {
  const status = ERROR_CODES[code].status;
  const body = JSON.stringify(jsonRpcError(code, message));
  return (
    `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\nConnection: close\r\n` +
    `Content-Type: application/json; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`
  );
}

/**
 * A `clientError` listener for the server the gateway's handler runs on:
 * answers as Node does without one (the same statuses, written only when no
 * answer to the connection's request in flight has begun, the connection
 * then destroyed), but with a JSON-RPC error body, as every other refusal of
 * the gateway's. Returns the code of a request refused (a parser error or
 * a deadline, answered), for refusals_total; undefined for a connection that
 * broke (a reset), that its client ended part-way through a request, or whose
 * answer had begun. (Gateway.clientError counts them.)
 */
export function answerClientError(error: Error & { code?: unknown }, socket: Duplex): ClientErrorCode | undefined {
  const { code: errorCode } = error;
  const known = typeof errorCode === 'string' ? REFUSALS[errorCode] : undefined;
  // Node's other parser errors (HPE_*) are bytes that are not HTTP; anything else a socket's own failure.
  const malformed = typeof errorCode === 'string' && errorCode.startsWith('HPE_') && errorCode !== ENDED_MID_REQUEST;
  const refused = known ?? (malformed ? MALFORMED : undefined);
  // Node's own test: the response in flight on this connection, if any (a
  // keep-alive connection has written earlier answers, so bytesWritten says nothing).
  const inFlight = (socket as Duplex & { _httpMessage?: { headersSent?: boolean } | null })._httpMessage;
  const answering = socket.writable && !inFlight?.headersSent;
  if (answering) socket.write(answerOf(refused?.code ?? MALFORMED.code, refused?.message ?? MALFORMED.message));
  socket.destroy(error);
  return answering ? refused?.code : undefined;
}
