import type { Request } from 'express';
import { SwitchyardError } from '@switchyard/protocol';

/**
 * Reads a request body of at most `bytesMax` bytes. Routing needs the
 * JSON-RPC method and id, and a rescheduled `initialize` must be resent, so
 * POST bodies are held (bounded) while response bodies stream.
 * Throws SwitchyardError('body_too_large') as soon as the limit is passed.
 */
export function readBody(req: Request, bytesMax: number, signal: AbortSignal): Promise<Buffer> {
  const declared = Number(req.headers['content-length']);
  if (Number.isFinite(declared) && declared > bytesMax) {
    return Promise.reject(new SwitchyardError('body_too_large', `Request body exceeds ${bytesMax} bytes`));
  }
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const cleanup = (): void => {
      req.off('data', onData);
      req.off('end', onEnd);
      req.off('error', onError);
      signal.removeEventListener('abort', onAbort);
    };
    const onData = (chunk: Buffer): void => {
      size += chunk.length;
      if (size > bytesMax) {
        cleanup();
        // Keep draining so the 413 can be read by the client, without holding the bytes.
        req.resume();
        reject(new SwitchyardError('body_too_large', `Request body exceeds ${bytesMax} bytes`));
        return;
      }
      chunks.push(chunk);
    };
    const onEnd = (): void => {
      cleanup();
      resolve(Buffer.concat(chunks, size));
    };
    const onError = (error: Error): void => {
      cleanup();
      reject(error);
    };
    const onAbort = (): void => {
      cleanup();
      reject(signal.reason);
    };
    req.on('data', onData);
    req.on('end', onEnd);
    req.on('error', onError);
    signal.addEventListener('abort', onAbort, { once: true });
  });
}
