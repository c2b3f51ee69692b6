// Transport `auto` behind a front that answers the http2 upgrade with 101 and
// then drops the connection (a proxy that passes only WebSocket but claims
// any upgrade): no refusal shows it, and http2 must not be redialled for ever.
import { afterEach, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { ManualClock } from '@switchyard/clock/testing';
import type { Clock } from '@switchyard/clock';
import { dialTunnel } from '../src/index.ts';
import type { Tunnel, TunnelDialer } from '../src/index.ts';
import { HTTP2_RETRY_MS, HTTP2_SILENT_TUNNELS_MAX } from '../src/auto-transport.ts';
import { captureLogger, runtimeInfo, startScheduler, TOKEN, until, upgradeDropper } from './helpers.ts';

/** Longer than the retry period, so no heartbeat timer is mistaken for a redial. */
const PING_MS = 2 * 60 * 60_000;

describe('transport auto', () => {
  const open: { dialers: TunnelDialer[]; closers: (() => unknown)[] } = { dialers: [], closers: [] };
  afterEach(async () => {
    for (const d of open.dialers.splice(0)) await d.close();
    for (const close of open.closers.splice(0)) await close();
  });

  it('dials WebSocket after http2 tunnels dropped before the scheduler spoke, and tries http2 again later', async () => {
    const scheduler = await startScheduler();
    open.closers.push(() => scheduler.close());
    const front = await upgradeDropper(scheduler);
    open.closers.push(front.close);
    const tunnels: Tunnel[] = [];
    scheduler.events.on('tunnel', (t: Tunnel) => tunnels.push(t));
    const manual = new ManualClock();
    const redials: number[] = [];
    const clock: Clock = {
      now: () => manual.now(),
      monotonicNow: () => manual.monotonicNow(),
      setTimeout: (fn, ms) => (ms !== PING_MS && redials.push(ms), manual.setTimeout(fn, ms)),
    };
    const { logger, lines } = captureLogger();
    const dialer = dialTunnel({
      url: front.url,
      token: TOKEN,
      info: runtimeInfo('rt-auto'),
      handler: (_req, res) => res.end(),
      clock,
      logger,
      random: () => 0,
      backoff: { initialMs: 100, maxMs: 1600 },
      pingIntervalMs: PING_MS,
    });
    open.dialers.push(dialer);
    /** Runs the pending redial, then waits for its connect to be answered: over http2 (dropped) or a tunnel. */
    const nextDial = async (): Promise<void> => {
      const before = front.dropped() + tunnels.length;
      await until(() => redials.length > 0);
      await manual.advance(redials.splice(0).at(-1)!);
      await until(() => front.dropped() + tunnels.length > before);
    };
    const dials = (): [number, string[]] => [front.dropped(), tunnels.map((t) => t.transport)];

    await until(() => front.dropped() === 1);
    for (let i = 1; i < HTTP2_SILENT_TUNNELS_MAX; i++) await nextDial();
    assert.deepEqual(dials(), [HTTP2_SILENT_TUNNELS_MAX, []]);
    await nextDial();
    assert.deepEqual(dials(), [HTTP2_SILENT_TUNNELS_MAX, ['websocket']], 'then WebSocket');
    await until(() => dialer.connected);
    assert.equal(
      lines.filter((l) => l.msg === 'http2 tunnels dropped before the scheduler spoke HTTP/2; dialing WebSocket')
        .length,
      1,
    );

    // Lost within the retry period, the tunnel is redialled over WebSocket straight away.
    tunnels[0]!.close('lost');
    await until(() => !dialer.connected);
    await nextDial();
    assert.deepEqual(dials(), [HTTP2_SILENT_TUNNELS_MAX, ['websocket', 'websocket']]);
    await until(() => dialer.connected);

    // Past it, the next dial asks for http2 again; dropped once more, the one after it goes to WebSocket.
    // The period runs on the monotonic clock: a wall clock set back a day meanwhile does not stretch it.
    manual.stepWall(-24 * 60 * 60_000);
    await manual.advance(HTTP2_RETRY_MS);
    assert.ok(dialer.connected, 'a tunnel that is up is not dropped to try http2');
    tunnels[1]!.close('lost');
    await until(() => !dialer.connected);
    await nextDial();
    assert.deepEqual(dials(), [HTTP2_SILENT_TUNNELS_MAX + 1, ['websocket', 'websocket']]);
    await nextDial();
    assert.deepEqual(dials(), [HTTP2_SILENT_TUNNELS_MAX + 1, ['websocket', 'websocket', 'websocket']]);
  });

  it('keeps dialling http2 when the scheduler spoke on the tunnels it dropped', async () => {
    const scheduler = await startScheduler();
    open.closers.push(() => scheduler.close());
    const tunnels: Tunnel[] = [];
    // The scheduler itself takes each tunnel and closes it at once: no sign against the transport.
    scheduler.events.on('tunnel', (t: Tunnel) => {
      tunnels.push(t);
      if (tunnels.length <= HTTP2_SILENT_TUNNELS_MAX + 1) t.close('refused after the upgrade');
    });
    const manual = new ManualClock();
    const redials: number[] = [];
    const clock: Clock = {
      now: () => manual.now(),
      monotonicNow: () => manual.monotonicNow(),
      setTimeout: (fn, ms) => (ms !== PING_MS && redials.push(ms), manual.setTimeout(fn, ms)),
    };
    const dialer = dialTunnel({
      url: scheduler.url,
      token: TOKEN,
      info: runtimeInfo('rt-auto-spoke'),
      handler: (_req, res) => res.end(),
      clock,
      random: () => 0,
      backoff: { initialMs: 100, maxMs: 1600 },
      pingIntervalMs: PING_MS,
    });
    open.dialers.push(dialer);
    for (let i = 1; i <= HTTP2_SILENT_TUNNELS_MAX + 1; i++) {
      await until(() => redials.length > 0);
      await manual.advance(redials.splice(0).at(-1)!);
    }
    await until(() => tunnels.length === HTTP2_SILENT_TUNNELS_MAX + 2 && dialer.connected);
    assert.deepEqual(
      tunnels.map((t) => t.transport),
      Array.from({ length: HTTP2_SILENT_TUNNELS_MAX + 2 }, () => 'http2'),
    );
  });
});
