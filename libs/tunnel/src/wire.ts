import type http2 from 'node:http2';
import type { Duplex } from 'node:stream';
import { createWebSocketStream } from 'ws';
import type WebSocket from 'ws';

/** Largest WebSocket message one batched write makes; the peer accepts up to TUNNEL_DEFAULTS.wsPayloadBytesMax. */
export const WRITEV_BATCH_BYTES_MAX = 1024 * 1024;

/**
 * Turns an open WebSocket into the byte stream HTTP/2 runs on. Binary frames
 * only; the socket is closed when the stream ends or fails.
 */
export function byteStream(ws: WebSocket): Duplex {
  ws.binaryType = 'nodebuffer';
  const stream = createWebSocketStream(ws, { allowHalfOpen: false });
  // HTTP/2 hands over each flush as several buffers (frame headers, payloads)
  // inside cork()/uncork(); without a writev every buffer became its own
  // WebSocket message and socket write: 3-6 syscalls per proxied request on
  // each side. One message per flush keeps the same bytes in one write.
  // Message boundaries carry no meaning on this stream, so peers are unaffected.
  const writeOne = stream._write.bind(stream);
  const encoding = 'buffer' as BufferEncoding;
  stream._writev = (chunks, callback) => {
    // Batches stay well below the peer's WebSocket payload limit: a busy
    // session can queue megabytes of frames behind one cork.
    const batches: Buffer[] = [];
    let batch: Buffer[] = [];
    let size = 0;
    for (const { chunk } of chunks) {
      const bytes = chunk as Buffer;
      if (size > 0 && size + bytes.length > WRITEV_BATCH_BYTES_MAX) {
        batches.push(Buffer.concat(batch, size));
        batch = [];
        size = 0;
      }
      batch.push(bytes);
      size += bytes.length;
    }
    if (size > 0) batches.push(batch.length === 1 ? batch[0]! : Buffer.concat(batch, size));
    const next = (i: number): void => {
      if (i === batches.length - 1) return writeOne(batches[i]!, encoding, callback);
      writeOne(batches[i]!, encoding, (error) => (error ? callback(error) : next(i + 1)));
    };
    next(0);
  };
  // Socket errors surface on the stream too; the session reports them, an unhandled one would crash the process.
  stream.on('error', () => {});
  return stream;
}

/**
 * One liveness round: an HTTP/2 PING (answered by the peer's HTTP/2 stack)
 * and, on a WebSocket carrier, a WebSocket ping (answered by its WebSocket
 * layer, and keeps middleboxes from idling the connection out). Resolves with
 * the HTTP/2 round trip in ms.
 */
export function probe(session: http2.Http2Session, ws?: WebSocket): Promise<number> {
  const h2 = new Promise<number>((resolve, reject) => {
    try {
      const sent = session.ping((error, durationMs) => (error ? reject(error) : resolve(durationMs)));
      if (!sent) reject(new Error('too many outstanding pings'));
    } catch (error) {
      reject(error instanceof Error ? error : new Error(String(error)));
    }
  });
  if (!ws) return h2;
  const pong = new Promise<void>((resolve, reject) => {
    if (ws.readyState !== ws.OPEN) return reject(new Error('websocket not open'));
    ws.once('pong', () => resolve());
    ws.ping();
  });
  return Promise.all([h2, pong]).then(([rttMs]) => rttMs);
}
