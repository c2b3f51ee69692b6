// A client that sends its headers and then trickles its body (slowloris):
// the gateway takes the principal's concurrency slot before it reads the
// body, so a body that never ends must not hold that slot, and the
// connection, for ever. Real sockets on loopback against real runtimes.
import net from 'node:net';
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { INITIALIZE, post, startHarness } from './harness.ts';
import type { Harness } from './harness.ts';
import { until } from './until.ts';

const BODY_TIMEOUT_MS = 600;
/** Bytes the trickler sends at most: a bounded loop, a byte every TRICKLE_MS. */
const TRICKLE_BYTES_MAX = 100;
const TRICKLE_MS = 50;

describe('a request body trickled byte by byte', () => {
  let h: Harness;

  before(async () => {
    h = await startHarness(1, { principalConcurrencyMax: 1, bodyTimeoutMs: BODY_TIMEOUT_MS });
  });
  after(() => h.close());

  it('is answered 408 within bodyTimeoutMs, its connection cut and its concurrency slot given back', async () => {
    const { hostname, port, pathname } = new URL(h.url);
    const socket = net.connect(Number(port), hostname);
    socket.on('error', () => {});
    // Not events.once: it rejects on 'error', and a trickled byte that meets the cut connection is
    // answered with a reset (ECONNRESET), which is the connection closed all the same.
    const closed = new Promise((resolve) => socket.once('close', resolve));
    let answer = '';
    socket.on('data', (chunk: Buffer) => (answer += chunk.toString('latin1')));
    // Declares more than it will ever send; each byte keeps the connection busy, none completes the body.
    socket.write(
      `POST ${pathname} HTTP/1.1\r\nHost: ${hostname}\r\nContent-Type: application/json\r\n` +
        `Accept: application/json, text/event-stream\r\nContent-Length: ${10 * TRICKLE_BYTES_MAX}\r\n\r\n{`,
    );
    const startedAt = performance.now();
    let sent = 0;
    const trickle = setInterval(() => {
      if (sent++ < TRICKLE_BYTES_MAX && !socket.destroyed) socket.write(' ');
    }, TRICKLE_MS);
    try {
      await until(() => h.gateway.stats().inFlight === 1, 'the trickled request counted');
      // The slot is taken: the principal's next request is refused while the body trickles.
      assert.equal((await post(h.url, INITIALIZE)).status, 429);
      await until(() => answer.includes('\r\n\r\n'), 'an answer to the trickled request', 5_000);
      assert.match(answer, /^HTTP\/1\.1 408 /);
      assert.match(answer, /"reason":"request_timeout"/);
      const elapsedMs = performance.now() - startedAt;
      assert.ok(elapsedMs >= BODY_TIMEOUT_MS - 50, `answered after ${elapsedMs} ms, before the deadline`);
      await until(() => h.gateway.stats().inFlight === 0, 'the slot given back');
      // The trickler goes on sending, but the gateway cuts the connection (within the 2 s linger).
      await Promise.race([
        closed,
        new Promise((_, reject) => setTimeout(() => reject(new Error('connection still open')), 4_000).unref()),
      ]);
    } finally {
      clearInterval(trickle);
      socket.destroy();
    }
    // The principal is served again.
    assert.equal((await post(h.url, INITIALIZE)).status, 200);
  });

  it('leaves a body that arrives within the deadline alone', async () => {
    assert.equal((await post(h.url, INITIALIZE)).status, 200);
  });
});
