import type http2 from 'node:http2';
import type { Duplex } from 'node:stream';
import { createWebSocketStream } from 'ws';
import type WebSocket from 'ws';

/** Largest WebSocket message one flush makes; the peer accepts up to TUNNEL_DEFAULTS.wsPayloadBytesMax. */
export const WRITEV_BATCH_BYTES_MAX = 1024 * 1024;

/**
 * Bytes (waiting here plus buffered by the socket) up to which a write is
 * acknowledged before it is sent. Past it the acknowledgement waits for the
 * socket, so HTTP/2 stops producing frames: the send buffer stays bounded.
 */
export const WRITE_AHEAD_BYTES_MAX = 1024 * 1024;

/**
 * Event-loop turns a write waits for more frames before it leaves, per side.
 * Requests: HEADERS of a bodiless request carry END_STREAM, so the scheduler
 * (HTTP/2 client) sends after one turn. Responses: an http2 compat response
 * produces HEADERS and DATA in one turn but its empty END_STREAM frame only
 * two turns later (write completion, then the trailers handshake compat
 * always asks for); waiting three turns sends all three in one message — one
 * socket write and one wake-up of the scheduler instead of two.
 */
export const FLUSH_TURNS = { client: 1, server: 3 } as const;

export interface ByteStreamOptions {
  /** Event-loop turns (setImmediate hops) a write waits for more writes before it is sent. Default 1. */
  readonly flushTurns?: number;
}

type Callback = (error?: Error | null) => void;

/**
 * Turns an open WebSocket into the byte stream HTTP/2 runs on. Binary frames
 * only; the socket is closed when the stream ends or fails.
 *
 * Writes are gathered for `flushTurns` turns of the event loop and leave as
 * one WebSocket message (split at WRITEV_BATCH_BYTES_MAX): HTTP/2 emits the
 * frames of one response in several writes, and each message costs a socket
 * write here and a wake-up and parse on the peer. Message boundaries carry no
 * meaning on this stream, so peers are unaffected. A write is acknowledged at
 * once while at most WRITE_AHEAD_BYTES_MAX bytes wait (here and in the socket);
 * past that, when the socket has taken its batch. Not guaranteed: that an
 * acknowledged write reached the peer (the tunnel's liveness covers that).
 */
export function byteStream(ws: WebSocket, options: ByteStreamOptions = {}): Duplex {
  ws.binaryType = 'nodebuffer';
  const stream = createWebSocketStream(ws, { allowHalfOpen: false });
  const flushTurns = Math.max(1, options.flushTurns ?? 1);
  let queued: Buffer[] = [];
  let queuedBytes = 0;
  let scheduled = false;
  // Writable issues one write at a time, so at most one acknowledgement waits.
  let held: Callback | undefined;

  const flush = (): void => {
    scheduled = false;
    const ack = held;
    held = undefined;
    if (queuedBytes === 0) return ack?.();
    const batches = toBatches(queued);
    queued = [];
    queuedBytes = 0;
    if (ws.readyState !== ws.OPEN) return ack?.(new Error('websocket is not open'));
    for (let i = 0; i < batches.length; i++) ws.send(batches[i]!, i === batches.length - 1 ? ack : undefined);
  };
  const wait = (turnsLeft: number): void => {
    if (turnsLeft > 1) setImmediate(wait, turnsLeft - 1);
    else flush();
  };
  const enqueue = (chunks: readonly Buffer[], callback: Callback): void => {
    if (ws.readyState !== ws.OPEN) return callback(new Error('websocket is not open'));
    for (const chunk of chunks) {
      queued.push(chunk);
      queuedBytes += chunk.length;
    }
    if (!scheduled) {
      scheduled = true;
      setImmediate(wait, flushTurns);
    }
    if (queuedBytes + ws.bufferedAmount <= WRITE_AHEAD_BYTES_MAX) callback();
    else held = callback;
  };
  stream._write = (chunk: Buffer, _encoding, callback) => enqueue([chunk], callback);
  stream._writev = (chunks, callback) =>
    enqueue(
      chunks.map((c) => c.chunk as Buffer),
      callback,
    );
  // Ending closes the WebSocket; what is still gathered must leave before the close frame.
  const final = stream._final.bind(stream);
  stream._final = (callback) => {
    flush();
    final(callback);
  };
  // Socket errors surface on the stream too; the session reports them, an unhandled one would crash the process.
  stream.on('error', () => {});
  return stream;
}

/** Joins buffers into as few messages as WRITEV_BATCH_BYTES_MAX allows (a bigger single buffer stays whole). */
function toBatches(buffers: readonly Buffer[]): Buffer[] {
  const batches: Buffer[] = [];
  let batch: Buffer[] = [];
  let size = 0;
  for (const bytes of buffers) {
    if (size > 0 && size + bytes.length > WRITEV_BATCH_BYTES_MAX) {
      batches.push(Buffer.concat(batch, size));
      batch = [];
      size = 0;
    }
    batch.push(bytes);
    size += bytes.length;
  }
  if (size > 0) batches.push(batch.length === 1 ? batch[0]! : Buffer.concat(batch, size));
  return batches;
}

/**
 * One liveness round: an HTTP/2 PING (answered by the peer's HTTP/2 stack) and
 * a WebSocket ping (answered by its WebSocket layer, and keeps middleboxes from
 * idling the connection out). Resolves with the HTTP/2 round trip in ms.
 */
export function probe(session: http2.Http2Session, ws: WebSocket): Promise<number> {
  const h2 = new Promise<number>((resolve, reject) => {
    try {
      const sent = session.ping((error, durationMs) => (error ? reject(error) : resolve(durationMs)));
      if (!sent) reject(new Error('too many outstanding pings'));
    } catch (error) {
      reject(error instanceof Error ? error : new Error(String(error)));
    }
  });
  const pong = new Promise<void>((resolve, reject) => {
    if (ws.readyState !== ws.OPEN) return reject(new Error('websocket not open'));
    ws.once('pong', () => resolve());
    ws.ping();
  });
  return Promise.all([h2, pong]).then(([rttMs]) => rttMs);
}
