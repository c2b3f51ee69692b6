// A step of the scheduler's wall clock (NTP, an operator) must not change
// what it judges of a runtime's pings: those are durations, measured on the
// monotonic clock.
import { afterEach, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { ManualClock } from '@switchyard/clock/testing';
import type { TunnelDialer } from '../src/index.ts';
import { startRuntime, startScheduler, until } from './helpers.ts';
import type { Scheduler } from './helpers.ts';

/** The scheduler's ping timing: its probe goes out at 60 s and is given up 1 s later. */
const SCHEDULER_PING_MS = 60_000;
const SCHEDULER_PING_TIMEOUT_MS = 1_000;
/** What the runtime announces; its own clock never moves, so it never pings. */
const RUNTIME_PING_MS = 1_000;

describe("a tunnel's view of its runtime's pings, when the wall clock steps", () => {
  const open: { scheduler?: Scheduler; dialer?: TunnelDialer } = {};
  afterEach(async () => {
    await open.dialer?.close();
    await open.scheduler?.close();
  });

  it('neither looks quiet after a step forward nor moves when the runtime notices after a step back', async () => {
    const clock = new ManualClock();
    open.scheduler = await startScheduler({
      clock,
      pingIntervalMs: SCHEDULER_PING_MS,
      pingTimeoutMs: SCHEDULER_PING_TIMEOUT_MS,
    });
    clock.stepWall(-3_600_000); // set back an hour before the runtime dials
    const { dialer, tunnel } = await startRuntime(open.scheduler, 'rt-step', (_req, res) => res.end(), {
      clock: new ManualClock(),
      pingIntervalMs: RUNTIME_PING_MS,
      transport: 'http2',
    });
    open.dialer = dialer;
    const acceptedAt = clock.monotonicNow();
    clock.stepWall(7_200_000); // and forward two hours: no time has passed for the runtime's pings
    assert.equal(tunnel.peerQuiet, false, 'a runtime whose ping is not yet due is not quiet');
    // The scheduler's probe goes out and times out within this one advance: no I/O runs meanwhile.
    await clock.advance(SCHEDULER_PING_MS + SCHEDULER_PING_TIMEOUT_MS);
    await until(() => tunnel.closed);
    assert.match(await tunnel.whenClosed, /no ping answer/);
    assert.equal(
      tunnel.peerNoticesBy,
      acceptedAt + 2 * RUNTIME_PING_MS,
      'a living runtime notices one interval and one timeout after its last sign of life, a monotonic reading',
    );
  });
});
