import type { IncomingMessage } from 'node:http';
import { SwitchyardError } from '@switchyard/protocol';

export interface ReadBodyOptions {
  /** Largest body accepted; past it SwitchyardError('body_too_large'). */
  readonly bytesMax: number;
  /** Aborts the read (e.g. when the client goes away); rejects with the signal's reason. */
  readonly signal?: AbortSignal;
}

/**
 * Reads a whole request body, bounded. A declared or streamed size past
 * `bytesMax` rejects at once; past a streamed overflow the rest is drained
 * unbuffered so the 413 can still be written on the connection. A request that closes before its end
 * rejects. Listens for events rather than iterating the stream: the async
 * iterator's per-request machinery is a visible cost on hot paths.
 */
export function readBody(req: IncomingMessage, options: ReadBodyOptions): Promise<Buffer> {
  const { bytesMax, signal } = options;
  const tooLarge = (): SwitchyardError =>
    new SwitchyardError('body_too_large', `request body exceeds ${bytesMax} bytes`);
  const declared = Number(req.headers['content-length']);
  // A declared size past the limit is refused before reading a byte; Node's
  // server discards what the client still sends once the 413 is out.
  if (Number.isFinite(declared) && declared > bytesMax) return Promise.reject(tooLarge());
  if (signal?.aborted) return Promise.reject(signal.reason);
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const cleanup = (): void => {
      req.off('data', onData);
      req.off('end', onEnd);
      req.off('error', onError);
      req.off('close', onClose);
      signal?.removeEventListener('abort', onAbort);
    };
    const fail = (error: unknown): void => {
      cleanup();
      reject(error);
    };
    const onData = (chunk: Buffer): void => {
      size += chunk.length;
      if (size <= bytesMax) return void chunks.push(chunk);
      fail(tooLarge());
      req.resume();
    };
    const onEnd = (): void => {
      cleanup();
      resolve(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, size));
    };
    const onError = (error: Error): void => fail(error);
    const onClose = (): void => fail(new Error('request closed before its body ended'));
    const onAbort = (): void => fail(signal!.reason);
    req.on('data', onData);
    req.on('end', onEnd);
    req.on('error', onError);
    req.on('close', onClose);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}
