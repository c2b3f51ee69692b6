// The gateway binary against a client that trickles its request body: the
// request is answered 408 at --body-timeout-ms and gives its concurrency slot
// back. No scheduler is needed: the slot is taken, and the body read, before
// a request is routed.
import net from 'node:net';
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawnApp, until, type AppProcess } from '../support/processes.ts';

const BODY_TIMEOUT_MS = 1_000;
/** The trickle is bounded: at most this many bytes, one every TRICKLE_MS, never the whole declared body. */
const TRICKLE_BYTES_MAX = 100;
const TRICKLE_MS = 50;

/**
 * A request without a session: 429 while its principal is at the concurrency
 * limit, else 400 (it needs a session), without a scheduler. A request, not
 * a body that is no JSON: past the limit, the gateway reads a body to see if
 * it asks anything (a client's answers are carried), and a body that is no
 * JSON is answered 400 then.
 */
async function postSessionless(port: number): Promise<number> {
  const res = await fetch(`http://127.0.0.1:${port}/mcp`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' }),
  });
  await res.arrayBuffer();
  return res.status;
}

describe('the gateway binary and a trickled request body', () => {
  let gateway: AppProcess;
  before(async () => {
    gateway = await spawnApp('gateway', 'gw-slow-body', [
      ...['--host', '127.0.0.1', '--port', '0', '--schedulers', 'http://127.0.0.1:9'],
      ...['--principal-concurrency-max', '1', '--body-timeout-ms', String(BODY_TIMEOUT_MS), '--drain-delay-ms', '0'],
    ]);
  });
  after(() => gateway?.stop());

  it('answers 408 at --body-timeout-ms, closes the connection and serves the principal again', async () => {
    const port = gateway.port!;
    const socket = net.connect(port, '127.0.0.1');
    socket.on('error', () => {});
    // Not events.once: it rejects on 'error', and a trickled byte that meets the closed connection is
    // answered with a reset (ECONNRESET), which is the connection closed all the same.
    const closed = new Promise((resolve) => socket.once('close', resolve));
    let answer = '';
    socket.on('data', (chunk: Buffer) => (answer += chunk.toString('latin1')));
    // Written, not only queued, before the next request: the slot goes to whichever request the gateway reads first.
    await new Promise<void>((resolve, reject) =>
      socket.write(
        'POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n' +
          `Accept: application/json, text/event-stream\r\nContent-Length: ${10 * TRICKLE_BYTES_MAX}\r\n\r\n{`,
        (error) => (error ? reject(error) : resolve()),
      ),
    );
    let sent = 0;
    const trickle = setInterval(() => {
      if (sent++ < TRICKLE_BYTES_MAX && !socket.destroyed) socket.write(' ');
    }, TRICKLE_MS);
    try {
      // Its slot is held while the body trickles.
      assert.equal(await postSessionless(port), 429);
      await until('an answer to the trickled request', () => answer.includes('\r\n\r\n'), 5_000);
      assert.match(answer, /^HTTP\/1\.1 408 /);
      await Promise.race([
        closed,
        new Promise((_, reject) => setTimeout(() => reject(new Error('connection still open')), 4_000).unref()),
      ]);
    } finally {
      clearInterval(trickle);
      socket.destroy();
    }
    assert.equal(await postSessionless(port), 400);
  });
});
