import { Duplex } from 'node:stream';
import type WebSocket from 'ws';

/**
 * A byte stream over binary WebSocket messages. Unlike ws's
 * `createWebSocketStream`, it implements `_writev`: HTTP/2 writes a frame
 * header and its payload (and often several frames) per turn, and sending
 * them as one message saves a WebSocket frame and a socket write each.
 * Backpressure both ways: a full read buffer pauses the socket, and a write
 * completes only when ws has handed it to the socket.
 */
/** Largest merged message; below the peer's WebSocket payload limit. */
const MESSAGE_BYTES_MAX = 1024 * 1024;

export class WebSocketByteStream extends Duplex {
  readonly #ws: WebSocket;

  constructor(ws: WebSocket) {
    super({ allowHalfOpen: false, readableHighWaterMark: 1024 * 1024, writableHighWaterMark: 1024 * 1024 });
    this.#ws = ws;
    ws.binaryType = 'nodebuffer';
    ws.on('message', (data: Buffer) => {
      if (!this.push(data)) ws.pause();
    });
    ws.once('close', () => {
      this.push(null);
      this.destroy();
    });
    ws.once('error', (error) => this.destroy(error));
  }

  override _read(): void {
    if (this.#ws.isPaused) this.#ws.resume();
  }

  override _write(chunk: Buffer, _encoding: BufferEncoding, callback: (error?: Error | null) => void): void {
    this.#send(chunk, callback);
  }

  override _writev(chunks: { chunk: Buffer }[], callback: (error?: Error | null) => void): void {
    // Small pieces are merged up to MESSAGE_BYTES_MAX; a big payload goes alone rather than being copied.
    const messages: Buffer[] = [];
    let batch: Buffer[] = [];
    let size = 0;
    for (const { chunk } of chunks) {
      if (size + chunk.length > MESSAGE_BYTES_MAX && batch.length > 0) {
        messages.push(batch.length === 1 ? batch[0]! : Buffer.concat(batch, size));
        batch = [];
        size = 0;
      }
      batch.push(chunk);
      size += chunk.length;
    }
    if (batch.length > 0) messages.push(batch.length === 1 ? batch[0]! : Buffer.concat(batch, size));
    const last = messages.pop()!;
    for (const message of messages) this.#ws.send(message, { binary: true });
    this.#send(last, callback);
  }

  override _final(callback: (error?: Error | null) => void): void {
    if (this.#ws.readyState === this.#ws.OPEN) this.#ws.close(1000);
    callback();
  }

  override _destroy(error: Error | null, callback: (error?: Error | null) => void): void {
    if (this.#ws.readyState !== this.#ws.CLOSED) this.#ws.terminate();
    callback(error);
  }

  #send(data: Buffer, callback: (error?: Error | null) => void): void {
    if (this.#ws.readyState !== this.#ws.OPEN) return callback(new Error('websocket not open'));
    this.#ws.send(data, { binary: true }, (error) => callback(error ?? null));
  }
}
