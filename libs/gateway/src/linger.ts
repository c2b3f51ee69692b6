import type { IncomingMessage } from 'node:http';

/** Bounds on reading a refused body: enough for the client to see its 413, never an unbounded download. */
export interface LingerLimits {
  readonly lingerMs: number;
  readonly lingerBytesMax: number;
}

/**
 * After refusing a body (413), reads and drops what the client still sends,
 * so that the connection closes cleanly. Closing a socket with unread bytes
 * makes the kernel answer with a reset, which can destroy the 413 in the
 * client's buffers before it reads it (RFC 9112 §9.6, "lingering close").
 * The connection is cut once `lingerBytesMax` bytes or `lingerMs` have gone
 * by without the body ending; when the body does end, it stays usable.
 */
export function lingerAfterRefusal(req: IncomingMessage, limits: LingerLimits): void {
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
