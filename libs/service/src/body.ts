import type { IncomingMessage } from 'node:http';
import { SwitchyardError } from '@switchyard/protocol';

export interface ReadBodyOptions {
  /** Largest body accepted; past it SwitchyardError('body_too_large'). */
  readonly bytesMax: number;
  /** Aborts the read (e.g. when the client goes away); rejects with the signal's reason. */
  readonly signal?: AbortSignal;
  /**
   * How long the whole body may take to arrive, from this call; past it
   * SwitchyardError('request_timeout'), and what the client still sends is
   * dropped within `linger` bounds. Default none.
   */
  readonly timeoutMs?: number;
  /** Bounds on reading and dropping a refused body; default 2 s and 16 MiB. */
  readonly linger?: LingerLimits;
}

/** Bounds on reading a refused body: enough for the client to see its 413, never an unbounded download. */
export interface LingerLimits {
  readonly lingerMs: number;
  readonly lingerBytesMax: number;
}

/**
 * What readBody lingers by default; a server's own deadline on receiving a
 * request (Node's requestTimeout) must leave room for it, or it would cut
 * the connection before the refusal reached the client.
 */
export const LINGER_DEFAULTS: LingerLimits = { lingerMs: 2_000, lingerBytesMax: 16 * 1024 * 1024 };

/**
 * Reads a whole request body, bounded. A declared or streamed size past
 * `bytesMax` rejects at once, and the rest of the body is read and dropped
 * within `linger` bounds (see `lingerAfterRefusal`), so the caller's 413
 * reaches the client; so is a body still arriving at `timeoutMs` (a 408: a
 * client trickling its body would otherwise hold the caller's resources for
 * as long as it likes). A request that closes before its end rejects.
 * Listens for events rather than iterating the stream: the async
 * iterator's per-request machinery is a visible cost on hot paths.
 */
export function readBody(req: IncomingMessage, options: ReadBodyOptions): Promise<Buffer> {
  const { bytesMax, signal, timeoutMs } = options;
  const declared = Number(req.headers['content-length']);
  const refuse = (code: 'body_too_large' | 'request_timeout' = 'body_too_large'): SwitchyardError => {
    lingerAfterRefusal(req, options.linger ?? LINGER_DEFAULTS);
    const message =
      code === 'body_too_large'
        ? `request body exceeds ${bytesMax} bytes`
        : `request body not received within ${timeoutMs} ms`;
    return new SwitchyardError(code, message);
  };
  // A declared size past the limit is refused before a byte is kept.
  if (Number.isFinite(declared) && declared > bytesMax) return Promise.reject(refuse());
  if (signal?.aborted) return Promise.reject(signal.reason);
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const cleanup = (): void => {
      clearTimeout(timer);
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
      fail(refuse());
    };
    const onEnd = (): void => {
      cleanup();
      resolve(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, size));
    };
    const onError = (error: Error): void => fail(error);
    const onClose = (): void => fail(new Error('request closed before its body ended'));
    const onAbort = (): void => fail(signal!.reason);
    const timer = timeoutMs === undefined ? undefined : setTimeout(() => fail(refuse('request_timeout')), timeoutMs);
    timer?.unref();
    req.on('data', onData);
    req.on('end', onEnd);
    req.on('error', onError);
    req.on('close', onClose);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

/**
 * Reads and drops what the client still sends of a refused body, so that the
 * connection closes cleanly. Closing a socket with unread bytes makes the
 * kernel answer with a reset, which can destroy the 413 in the client's
 * buffers before it reads it (RFC 9112 §9.6, "lingering close"). The
 * connection is cut once `lingerBytesMax` bytes or `lingerMs` have gone by
 * without the body ending; when the body does end, it stays usable.
 */
function lingerAfterRefusal(req: IncomingMessage, limits: LingerLimits): void {
  if (req.complete || req.destroyed) return;
  let dropped = 0;
  const cut = (): void => {
    clearTimeout(timer);
    req.socket.destroy();
  };
  const timer = setTimeout(cut, limits.lingerMs);
  timer.unref();
  req.on('data', (chunk: Buffer) => {
    dropped += chunk.length;
    if (dropped > limits.lingerBytesMax) cut();
  });
  req.once('end', () => clearTimeout(timer));
  req.once('close', () => clearTimeout(timer));
  req.resume();
}
