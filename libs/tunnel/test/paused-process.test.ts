// A scheduler whose own event loop stood still (CPU starved, a long GC, a
// burst of work) past its tunnel ping timeout: when its loop comes back, Node
// runs the timeout's timer before it reads the socket, where the runtime's
// answer may be waiting. The runtime answered; the scheduler was not looking.
import { afterEach, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { ManualClock } from '@switchyard/clock/testing';
import type { CarrierTransport, TunnelDialer } from '../src/index.ts';
import { readStream, startRuntime, startScheduler, until } from './helpers.ts';
import type { Scheduler } from './helpers.ts';

const PING_INTERVAL_MS = 1_000;
const PING_TIMEOUT_MS = 300;

describe('a tunnel whose scheduler stood still past its ping timeout', () => {
  const open: { scheduler?: Scheduler; dialer?: TunnelDialer } = {};
  afterEach(async () => {
    await open.dialer?.close();
    await open.scheduler?.close();
  });

  for (const transport of ['http2', 'websocket'] satisfies CarrierTransport[]) {
    it(`stays up when the runtime's answer is read on its return (${transport})`, async () => {
      const clock = new ManualClock();
      open.scheduler = await startScheduler({
        clock,
        pingIntervalMs: PING_INTERVAL_MS,
        pingTimeoutMs: PING_TIMEOUT_MS,
      });
      const { dialer, tunnel } = await startRuntime(open.scheduler, `rt-${transport}`, (_req, res) => res.end('hi'), {
        // Its own clock never moves: only the scheduler pings.
        clock: new ManualClock(),
        transport,
      });
      open.dialer = dialer;
      // The probe goes out; the loop then stands still 700 ms past the timeout, and no I/O runs in between.
      await clock.advance(PING_INTERVAL_MS);
      clock.standStill(PING_TIMEOUT_MS + 700);
      await clock.advance(0);
      assert.equal(tunnel.closed, false, 'the timeout came due while the scheduler itself stood still');
      await until(() => tunnel.rttMs !== undefined || tunnel.closed);
      assert.equal(tunnel.closed, false);
      const answer = await readStream(tunnel.request({ ':path': '/hello' }, { endStream: true }));
      assert.deepEqual(answer, { status: 200, body: 'hi' });
    });
  }
});
