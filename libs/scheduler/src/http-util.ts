import { createHash, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { SwitchyardError, statusOf } from '@switchyard/protocol';

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
  sendJson(res, statusOf(error), { error: message, code });
}

/**
 * Reads and parses a JSON body of at most `bytesMax`; 413 past it, 400 when it
 * is not JSON. Listens for events rather than iterating the stream: the async
 * iterator's per-request machinery was a visible share of a schedule answer.
 */
export function readJson(req: IncomingMessage, bytesMax: number): Promise<unknown> {
  const declared = Number(req.headers['content-length'] ?? 0);
  if (declared > bytesMax) {
    req.resume();
    return Promise.reject(new SwitchyardError('body_too_large', `body exceeds ${bytesMax} bytes`));
  }
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const cleanup = (): void => {
      req.off('data', onData);
      req.off('end', onEnd);
      req.off('error', onError);
      req.off('close', onClose);
    };
    const onData = (chunk: Buffer): void => {
      size += chunk.length;
      if (size <= bytesMax) return void chunks.push(chunk);
      cleanup();
      // Keep draining (unbuffered) so the 413 can still be written on this connection.
      req.resume();
      reject(new SwitchyardError('body_too_large', `body exceeds ${bytesMax} bytes`));
    };
    const onEnd = (): void => {
      cleanup();
      const text = chunks.length === 1 ? chunks[0]!.toString('utf8') : Buffer.concat(chunks).toString('utf8');
      try {
        resolve(JSON.parse(text));
      } catch (cause) {
        reject(new SwitchyardError('parse_error', 'body is not valid JSON', { cause }));
      }
    };
    const onError = (error: Error): void => {
      cleanup();
      reject(error);
    };
    const onClose = (): void => {
      cleanup();
      reject(new Error('request closed before its body ended'));
    };
    req.on('data', onData);
    req.on('end', onEnd);
    req.on('error', onError);
    req.on('close', onClose);
  });
}

const digest = (value: string): Buffer => createHash('sha256').update(value).digest();

/**
 * True when `authorization` is `Bearer <t>` for one of `tokens`. Every token
 * is compared, in constant time over digests, so neither timing nor an early
 * exit tells which one (or which prefix) matched. No tokens: false.
 */
export function bearerMatches(authorization: string | undefined, tokens: readonly string[]): boolean {
  const presented = /^Bearer (.+)$/.exec(authorization ?? '')?.[1];
  if (presented === undefined) return false;
  const given = digest(presented);
  let match = false;
  for (const token of tokens) match = timingSafeEqual(given, digest(token)) || match;
  return match;
}
