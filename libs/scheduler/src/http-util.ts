import { STATUS_CODES, type IncomingMessage, type ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import { SwitchyardError, statusOf, type ApiError } from '@switchyard/protocol';
import { readBody } from '@switchyard/service';

/** Writes a JSON body with the given status; no-op when the response already started. */
export function sendJson(res: ServerResponse, status: number, body: unknown): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  const text = JSON.stringify(body);
  res.writeHead(status, {
    'content-type': 'application/json',
    'content-length': Buffer.byteLength(text),
    'cache-control': 'no-store',
  });
  res.end(text);
}

/** Replies `{error, code}` for a thrown value; unknown failures are a 500, never blamed on the client. */
export function sendError(res: ServerResponse, error: unknown): void {
  const message = error instanceof SwitchyardError ? error.message : 'internal error';
  const code = error instanceof SwitchyardError ? error.code : 'internal';
  sendJson(res, statusOf(error), { error: message, code } satisfies ApiError);
}

/** Reads and parses a JSON body of at most `bytesMax`; 413 past it, 400 when it is not JSON. */
export async function readJson(req: IncomingMessage, bytesMax: number): Promise<unknown> {
  const body = await readBody(req, { bytesMax });
  try {
    return JSON.parse(body.toString('utf8'));
  } catch (cause) {
    throw new SwitchyardError('parse_error', 'body is not valid JSON', { cause });
  }
}

/** Answers an upgrade request on its raw socket (no ServerResponse there) with a JSON body, and closes it. */
export function endSocketWithJson(
  socket: Duplex,
  status: number,
  body: unknown,
  headers: Readonly<Record<string, string>> = {},
): void {
  socket.on('error', () => {});
  const text = JSON.stringify(body);
  const extra = Object.entries(headers).map(([name, value]) => `${name}: ${value}\r\n`);
  socket.end(
    `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\n${extra.join('')}Connection: close\r\n` +
      `Content-Type: application/json\r\nContent-Length: ${Buffer.byteLength(text)}\r\n\r\n${text}`,
  );
}
