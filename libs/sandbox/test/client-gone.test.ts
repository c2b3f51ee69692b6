// A client that leaves in the middle of sending its request (its connection
// closed before the body's end) is the client's doing, not the runtime's: it
// is no error in the runtime's log. Under load clients do this by the
// hundred, and error lines for it would bury the runtime's own faults.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import net from 'node:net';
import { once } from 'node:events';
import type { SandboxHost } from '@switchyard/sandbox';
import { captureLogger, serveHttp1, testHost, type Served } from './fixtures/harness.ts';

/** Sends the head and a part of a body `length` long, then closes the connection. */
async function leaveMidBody(url: string, path: string): Promise<void> {
  const { port } = new URL(url);
  const socket = net.connect(Number(port), '127.0.0.1');
  await once(socket, 'connect');
  socket.write(
    `POST ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n` +
      'Accept: application/json, text/event-stream\r\nContent-Length: 1000\r\n\r\n{"jsonrpc":"2.0",',
  );
  await new Promise((resolve) => setTimeout(resolve, 50));
  socket.destroy();
}

describe('a client that leaves while it sends its request body', () => {
  const logger = captureLogger();
  let host: SandboxHost;
  let served: Served;
  before(async () => {
    host = testHost({ runtimeId: 'rt-gone', classes: { demo: { engine: 'builtin' } }, logger });
    served = await serveHttp1(host);
  });
  after(async () => {
    await served.close();
    await host.close();
  });

  for (const path of ['/mcp', '/sandboxes/p1', '/sandboxes/p1/toolcall']) {
    it(`is not logged as an error (${path})`, async () => {
      const before = logger.lines.length;
      await leaveMidBody(served.url, path);
      // The host notices once the socket's close reaches the body read; then it answers whatever it answers.
      await new Promise((resolve) => setTimeout(resolve, 200));
      const errors = logger.lines.slice(before).filter((line) => line.level === 'error');
      assert.deepEqual(errors, []);
      // Still serving.
      const answer = await fetch(`${served.url}/weight`);
      assert.equal(answer.status, 200);
    });
  }
});
