import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { AddressInfo } from 'node:net';
import { WebSocket, WebSocketServer } from 'ws';
import { TUNNEL_DEFAULTS } from '@switchyard/tunnel';
import { WRITEV_BATCH_BYTES_MAX, byteStream } from '../src/wire.ts';

describe('the WebSocket byte stream', () => {
  const server = new WebSocketServer({ host: '127.0.0.1', port: 0, maxPayload: TUNNEL_DEFAULTS.wsPayloadBytesMax });
  after(() => new Promise((resolve) => server.close(resolve)));

  it('batches a corked burst larger than the peer payload limit into messages the peer accepts', async () => {
    if (!server.address()) await new Promise((resolve) => server.once('listening', resolve));
    const received = new Promise<{ bytes: number; largest: number; errors: number }>((resolve) => {
      server.once('connection', (ws) => {
        let bytes = 0;
        let largest = 0;
        let errors = 0;
        ws.on('error', () => errors++);
        ws.on('message', (data: Buffer) => {
          bytes += data.length;
          largest = Math.max(largest, data.length);
          if (bytes >= 8 * 1024 * 1024) resolve({ bytes, largest, errors });
        });
        ws.on('close', () => resolve({ bytes, largest, errors }));
      });
    });
    const client = new WebSocket(`ws://127.0.0.1:${(server.address() as AddressInfo).port}`);
    await new Promise((resolve) => client.once('open', resolve));
    const stream = byteStream(client);
    const chunk = Buffer.alloc(64 * 1024, 7);
    stream.cork();
    for (let i = 0; i < 128; i++) stream.write(chunk);
    stream.uncork();
    const result = await received;
    client.terminate();
    assert.equal(result.errors, 0);
    assert.equal(result.bytes, 8 * 1024 * 1024, 'every byte arrived on an open connection');
    assert.ok(result.largest <= WRITEV_BATCH_BYTES_MAX, `largest message ${result.largest} bytes`);
  });

  // Why the writev exists: HTTP/2 flushes frame headers and payloads as
  // separate buffers, and one WebSocket message (one socket write) per
  // buffer cost several syscalls and peer wake-ups per proxied request.
  const small = [
    { name: 'sends a single write as one message', buffers: ['frame'] },
    { name: 'sends the buffers of one corked flush as one message, in order', buffers: ['head', 'er', 'payload!'] },
  ];
  for (const c of small) {
    it(c.name, async () => {
      if (!server.address()) await new Promise((resolve) => server.once('listening', resolve));
      const accepted = new Promise<WebSocket>((resolve) => server.once('connection', resolve));
      const client = new WebSocket(`ws://127.0.0.1:${(server.address() as AddressInfo).port}`);
      await new Promise((resolve) => client.once('open', resolve));
      const peer = await accepted;
      const messages: string[] = [];
      const marker = new Promise<void>((resolve) =>
        peer.on('message', (data: Buffer) => {
          messages.push(data.toString());
          if (data.toString() === '|end') resolve();
        }),
      );
      const stream = byteStream(client);
      stream.cork();
      for (const b of c.buffers) stream.write(Buffer.from(b));
      stream.uncork();
      // A later write of its own: once it arrives, every earlier byte has.
      await new Promise<void>((resolve) => setImmediate(resolve));
      stream.write(Buffer.from('|end'));
      await marker;
      client.terminate();
      assert.deepEqual(messages, [c.buffers.join(''), '|end']);
    });
  }
});
