// A client that stops reading a stream whose events keep coming: the
// runtime ends the response once nothing was taken for writeStallMs,
// instead of queueing the events for ever. Real HTTP on loopback; the body
// enqueues without regard to backpressure, as the MCP SDK's transport does.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { connect } from 'node:net';
import { once } from 'node:events';
import { within } from '@switchyard/clock/testing';
import { answerWriter } from '../src/answer.ts';

const CHUNK = new Uint8Array(64 * 1024).fill(0x61);

/** A server whose one answer is an event stream fed a chunk every millisecond until cancelled. */
async function startFlood(writeStallMs: number) {
  let enqueuedBytes = 0;
  let cancelled = false;
  let released!: () => void;
  const release = new Promise<void>((resolve) => (released = resolve));
  const handle = async (): Promise<{ response: Response; release: () => void }> => {
    let timer: NodeJS.Timeout | undefined;
    const body = new ReadableStream<Uint8Array>({
      start(controller) {
        timer = setInterval(() => {
          controller.enqueue(CHUNK);
          enqueuedBytes += CHUNK.byteLength;
        }, 1);
      },
      cancel() {
        cancelled = true;
        clearInterval(timer);
      },
    });
    return { response: new Response(body, { headers: { 'content-type': 'text/event-stream' } }), release: released };
  };
  const server = createServer(answerWriter(handle, { maxRequestBodySize: 1024, onerror: () => {}, writeStallMs }));
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return {
    port: (server.address() as AddressInfo).port,
    release,
    enqueuedBytes: () => enqueuedBytes,
    cancelled: () => cancelled,
    close: () => {
      server.closeAllConnections();
      server.close();
    },
  };
}

describe('a response its client stopped reading', () => {
  it('is ended, and its body cancelled, after writeStallMs without progress', async () => {
    const flood = await startFlood(300);
    const socket = connect(flood.port, '127.0.0.1');
    try {
      await once(socket, 'connect');
      socket.pause(); // reads nothing from here on
      socket.write('GET /mcp HTTP/1.1\r\nHost: x\r\n\r\n');
      await within(flood.release, 10_000, 'the answer was never released: its body is queued without bound');
      assert.equal(flood.cancelled(), true, 'the body is cancelled, so the source stops queueing');
      const queued = flood.enqueuedBytes();
      await new Promise((r) => setTimeout(r, 100));
      assert.equal(flood.enqueuedBytes(), queued, 'nothing more is queued once ended');
    } finally {
      socket.destroy();
      flood.close();
    }
  });

  it('is not ended while its client keeps reading, however slowly', async () => {
    const flood = await startFlood(2_000);
    const socket = connect(flood.port, '127.0.0.1');
    try {
      await once(socket, 'connect');
      socket.write('GET /mcp HTTP/1.1\r\nHost: x\r\n\r\n');
      // Takes a chunk every 10 ms for 2.5 s, far slower than the source
      // fills it: the response stays full, but drains well within 2 s.
      let read = 0;
      socket.on('data', (chunk: Buffer) => {
        read += chunk.byteLength;
        socket.pause();
        setTimeout(() => socket.resume(), 10);
      });
      await new Promise((r) => setTimeout(r, 2_500));
      assert.equal(flood.cancelled(), false, 'a client that reads keeps its stream');
      assert.ok(read > 1024 * 1024, `it kept getting data (${read} bytes)`);
    } finally {
      socket.destroy();
      flood.close();
    }
  });
});
