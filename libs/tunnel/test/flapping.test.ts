// A tunnel that is accepted and then dropped at once (a proxy in between
// that cuts it after the upgrade, a scheduler that takes it and then
// refuses it) must not be redialled at the first backoff step for ever.
import { afterEach, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { ManualClock } from '@switchyard/clock/testing';
import type { Clock } from '@switchyard/clock';
import { dialTunnel } from '../src/index.ts';
import type { Tunnel, TunnelDialer } from '../src/index.ts';
import { FLAP_LOG_INTERVAL_MS, FLAPS_LOGGED } from '../src/flap-log.ts';
import { captureLogger, runtimeInfo, startScheduler, TOKEN, until, upgradeDropper } from './helpers.ts';
import type { LogLine } from './helpers.ts';
import type { Scheduler } from './helpers.ts';

/** Far from every backoff delay here, so the heartbeat's timers are told apart from the redials. */
const PING_MS = 600_000;
const BACKOFF = { initialMs: 100, maxMs: 1600 };

/** A manual clock that notes the delay of every timer set on it. */
function recordingClock(): { clock: Clock; manual: ManualClock; delays: number[] } {
  const manual = new ManualClock();
  const delays: number[] = [];
  const clock: Clock = {
    now: () => manual.now(),
    monotonicNow: () => manual.monotonicNow(),
    setTimeout: (fn, ms) => (delays.push(ms), manual.setTimeout(fn, ms)),
  };
  return { clock, manual, delays };
}

/** The dialer's `tunnel …` lines, as `level msg` and the fields the test looks at. */
function tunnelLines(lines: LogLine[]): [string, number | undefined][] {
  return lines
    .filter((l) => l.msg.startsWith('tunnel '))
    .map((l) => [`${l.level} ${l.msg}`, (l.obj as { unlogged?: number }).unlogged]);
}

describe('a flapping tunnel', () => {
  const open: { dialers: TunnelDialer[]; schedulers: Scheduler[]; peers: (() => void)[] } = {
    dialers: [],
    schedulers: [],
    peers: [],
  };
  afterEach(async () => {
    for (const d of open.dialers.splice(0)) await d.close();
    for (const close of open.peers.splice(0)) close();
    for (const s of open.schedulers.splice(0)) await s.close();
  });

  type DialOptions = Parameters<typeof dialTunnel>[0];
  /** Runtime `id`'s dialler with the tests' timing (no jitter, BACKOFF, PING_MS), closed after the test. */
  const dial = (id: string, options: Pick<DialOptions, 'url' | 'clock'> & Partial<DialOptions>): TunnelDialer => {
    const dialer = dialTunnel({
      token: TOKEN,
      info: runtimeInfo(id),
      handler: (_req, res) => res.end(),
      random: () => 0,
      backoff: BACKOFF,
      pingIntervalMs: PING_MS,
      ...options,
    });
    open.dialers.push(dialer);
    return dialer;
  };

  it('dropped right after each upgrade, is redialled with a growing, capped backoff, not at the first step for ever', async () => {
    const peer = await upgradeDropper();
    open.peers.push(peer.close);
    const { clock, manual, delays } = recordingClock();
    const redials = (): number[] => delays.filter((ms) => ms !== PING_MS);
    dial('rt-flap', {
      url: peer.url,
      clock,
      // `auto` would move to WebSocket after two of these (auto-transport.test.ts); the backoff is the point here.
      transport: 'http2',
    });
    const expected = [100, 200, 400, 800, 1600, 1600];
    for (const [i, delayMs] of expected.entries()) {
      // Each dial is taken (the heartbeat starts) and dropped (the next dial is set).
      await until(() => redials().length === i + 1);
      assert.equal(delays.filter((ms) => ms === PING_MS).length, i + 1, `tunnel ${i + 1} was up`);
      assert.equal(redials()[i], delayMs, `redial ${i + 1} after ${redials()[i]} ms`);
      await manual.advance(delayMs - 1);
      assert.equal(peer.dropped(), i + 1, `no dial ${i + 2} before ${delayMs} ms`);
      await manual.advance(1);
      await until(() => peer.dropped() === i + 2);
    }
  });

  it('that then stays up through two pings is redialled at the first backoff step once lost', async () => {
    const scheduler = await startScheduler();
    open.schedulers.push(scheduler);
    // The scheduler takes the first three tunnels and closes them at once, then keeps one.
    const tunnels: Tunnel[] = [];
    scheduler.events.on('tunnel', (t: Tunnel) => {
      tunnels.push(t);
      if (tunnels.length <= 3) t.close('refused after the upgrade');
    });
    const { clock, manual, delays } = recordingClock();
    const pings = (): number => delays.filter((ms) => ms === PING_MS).length;
    const redials = (): number[] => delays.filter((ms) => ms !== PING_MS);
    const dialer = dial('rt-settles', {
      url: scheduler.url,
      clock,
    });
    for (const [i, delayMs] of [100, 200, 400].entries()) {
      await until(() => redials().length === i + 1);
      assert.equal(redials()[i], delayMs, `redial ${i + 1} after ${redials()[i]} ms`);
      await manual.advance(delayMs);
    }
    await until(() => tunnels.length === 4 && dialer.connected);
    // Two pings answered: each answer sets the next ping's timer (a ping's own timeout is PING_MS too).
    for (let answered = 1; answered <= 2; answered++) {
      const before = pings();
      await manual.advance(PING_MS);
      await until(() => pings() === before + 2);
    }
    assert.equal(redials().length, 3, 'no redial while it stayed up');
    tunnels[3]!.close('lost');
    await until(() => redials().length === 4);
    assert.equal(redials()[3], 100, 'a good tunnel lost is redialled at the first step');
  });

  it('logs its first flaps, then one connect and disconnect per interval saying how many it held back', async () => {
    const peer = await upgradeDropper();
    open.peers.push(peer.close);
    const { clock, manual, delays } = recordingClock();
    const { logger, lines } = captureLogger();
    const redials = (): number[] => delays.filter((ms) => ms !== PING_MS);
    // The default backoff's cap: dials 1 to 6 come at 0, 1, 3, 7, 15 and 31 s, then every 30 s.
    const backoff = { initialMs: 1000, maxMs: 30_000 };
    dial('rt-flap-log', {
      url: peer.url,
      clock,
      logger,
      backoff,
      transport: 'http2',
    });
    const dials = 26;
    for (let dial = 1; dial <= dials; dial++) {
      await until(() => redials().length === dial);
      if (dial < dials) await manual.advance(redials()[dial - 1]!);
    }
    assert.equal(peer.dropped(), dials);
    assert.equal(FLAP_LOG_INTERVAL_MS, 300_000, 'the dials below are counted for 5 min');
    assert.equal(FLAPS_LOGGED, 3, 'the dials below are counted for three logged in full');
    // Dials 1 to 3 are logged; dial 16 (at 331 s) is the first 5 min after dial 3 (3 s); dial 26 (631 s) the next.
    const pair = (unlogged?: number): [string, number | undefined][] => [
      ['info tunnel connected', unlogged],
      ['warn tunnel disconnected', undefined],
    ];
    assert.deepEqual(tunnelLines(lines), [...pair(), ...pair(), ...pair(), ...pair(12), ...pair(9)]);
  });

  it('held back, a connect is logged once the tunnel proves good, and its loss at once', async () => {
    const scheduler = await startScheduler();
    open.schedulers.push(scheduler);
    const tunnels: Tunnel[] = [];
    scheduler.events.on('tunnel', (t: Tunnel) => {
      tunnels.push(t);
      if (tunnels.length <= 4) t.close('refused after the upgrade');
    });
    const { clock, manual, delays } = recordingClock();
    const { logger, lines } = captureLogger();
    const pings = (): number => delays.filter((ms) => ms === PING_MS).length;
    const redials = (): number[] => delays.filter((ms) => ms !== PING_MS);
    const dialer = dial('rt-settles-log', {
      url: scheduler.url,
      clock,
      logger,
    });
    for (let i = 0; i < 4; i++) {
      await until(() => redials().length === i + 1);
      await manual.advance(redials()[i]!);
    }
    await until(() => tunnels.length === 5 && dialer.connected);
    const flapped = [1, 2, 3].flatMap((): [string, number | undefined][] => [
      ['info tunnel connected', undefined],
      ['warn tunnel disconnected', undefined],
    ]);
    assert.deepEqual(tunnelLines(lines), flapped, 'the first three flaps are logged, tunnels 4 and 5 not so far');
    // Each answer sets the next ping's timer (a ping's own timeout is PING_MS too).
    const before = pings();
    await manual.advance(PING_MS);
    await until(() => pings() === before + 2);
    assert.deepEqual(tunnelLines(lines), flapped, 'one ping answered is not enough');
    await manual.advance(PING_MS);
    await until(() => pings() === before + 4);
    assert.deepEqual(tunnelLines(lines), [...flapped, ['info tunnel connected', 1]]);
    tunnels[4]!.close('lost');
    await until(() => redials().length === 5);
    assert.equal(redials()[4], 100, 'a good tunnel lost is redialled at the first step');
    assert.deepEqual(tunnelLines(lines).slice(7), [['warn tunnel disconnected', undefined]]);
  });

  it('lost once before it proved good, logs its redial at once: one early loss is no flapping', async () => {
    const scheduler = await startScheduler();
    open.schedulers.push(scheduler);
    let accepted = 0;
    scheduler.events.on('tunnel', (t: Tunnel) => {
      if (++accepted === 1) t.close('a replica restarting');
    });
    const { clock, manual, delays } = recordingClock();
    const { logger, lines } = captureLogger();
    const dialer = dial('rt-once', {
      url: scheduler.url,
      clock,
      logger,
    });
    await until(() => delays.some((ms) => ms !== PING_MS));
    await manual.advance(BACKOFF.initialMs);
    await until(() => accepted === 2 && dialer.connected);
    assert.deepEqual(tunnelLines(lines), [
      ['info tunnel connected', undefined],
      ['warn tunnel disconnected', undefined],
      ['info tunnel connected', undefined],
    ]);
  });

  it('that first came up after failed dials, is redialled from the first step: the dials were no flapping', async () => {
    const scheduler = await startScheduler();
    open.schedulers.push(scheduler);
    let accepted = 0;
    scheduler.events.on('tunnel', (t: Tunnel) => {
      accepted++;
      t.close('refused after the upgrade');
    });
    const { clock, manual, delays } = recordingClock();
    const redials = (): number[] => delays.filter((ms) => ms !== PING_MS);
    dial('rt-late', {
      // Two replicas that refuse connections (nothing listens on ports 1 and 2), then one that drops each tunnel.
      url: 'http://127.0.0.1:1',
      fallbackUrls: ['http://127.0.0.1:2', scheduler.url],
      clock,
    });
    // Failed dials: 100, 200; then tunnels lost one after the other: 100, 200, 400.
    for (const [i, delayMs] of [100, 200, 100, 200, 400].entries()) {
      await until(() => redials().length === i + 1);
      assert.equal(redials()[i], delayMs, `redial ${i + 1} after ${redials()[i]} ms`);
      await manual.advance(delayMs);
    }
    await until(() => accepted === 4);
  });
});
