// The scheduler's `tunnel open` and `tunnel closed` lines for a runtime whose
// tunnels keep closing as soon as they open, here one that redials every
// 100 ms without backing off (an old or broken runtime). The scheduler and the
// runtime share one manual clock; the tunnels are real, on loopback.
import { afterEach, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import type { Duplex } from 'node:stream';
import { ManualClock } from '@switchyard/clock/testing';
import type { Clock } from '@switchyard/clock';
import { dialTunnel } from '../src/index.ts';
import type { Tunnel, TunnelDialer } from '../src/index.ts';
import { FLAP_LOG_INTERVAL_MS, FLAPS_LOGGED } from '../src/flap-log.ts';
import { TUNNEL_UPGRADE } from '../src/carrier.ts';
import { CONNECT_PATH } from '../src/defaults.ts';
import { captureLogger, encodeInfo, runtimeInfo, startScheduler, TOKEN, until } from './helpers.ts';
import type { LogLine, Scheduler } from './helpers.ts';

/** The scheduler's ping interval: a tunnel that answers two of its pings is good. Its pings time out far later. */
const PING_MS = 60_000;
const REDIAL_MS = 100;

/**
 * One end's view of `clock`, counting the redials it sets (every timer of
 * REDIAL_MS) and its heartbeat's next pings (every timer of PING_MS): one as
 * a tunnel opens, then one per ping answered.
 */
interface CountingClock {
  readonly clock: Clock;
  redials(): number;
  pings(): number;
}

function countingClock(clock: ManualClock): CountingClock {
  let redials = 0;
  let pings = 0;
  return {
    clock: {
      now: () => clock.now(),
      monotonicNow: () => clock.monotonicNow(),
      setTimeout: (fn, ms) => (ms === REDIAL_MS && redials++, ms === PING_MS && pings++, clock.setTimeout(fn, ms)),
    },
    redials: () => redials,
    pings: () => pings,
  };
}

/**
 * Moves `clock` one ping interval at a time, `n` times, each time waiting
 * (real I/O) until the ping each of `ends` sent then is answered: so the next
 * goes out one interval on.
 */
async function pingRounds(clock: ManualClock, ends: readonly CountingClock[], n: number): Promise<void> {
  for (let round = 0; round < n; round++) {
    const before = ends.map((end) => end.pings());
    await clock.advance(PING_MS);
    await until(() => ends.every((end, i) => end.pings() === before[i]! + 1));
  }
}

/** A runtime `id` dialling `scheduler` on `clock`, redialling every REDIAL_MS (no backoff), its own pings off. */
function redialingDialer(scheduler: Scheduler, clock: Clock, id: string): TunnelDialer {
  return dialTunnel({
    url: scheduler.url,
    token: TOKEN,
    info: runtimeInfo(id),
    handler: (_req, res) => res.end(),
    clock,
    random: () => 0,
    backoff: { initialMs: REDIAL_MS, maxMs: REDIAL_MS },
    pingIntervalMs: 24 * 60 * 60_000,
  });
}

/** The scheduler's tunnel lines of one runtime, as `msg` and `unlogged`. */
function tunnelLines(lines: LogLine[], runtime: string): [string, number | undefined][] {
  return lines
    .filter((l) => /^tunnel (open|closed)$/.test(l.msg) && (l.obj as { runtime?: string }).runtime === runtime)
    .map((l) => [l.msg, (l.obj as { unlogged?: number }).unlogged]);
}

/**
 * A runtime stand-in that takes the upgrade and then answers nothing (a
 * frozen runtime, or a front that passed the upgrade and stalls): the
 * scheduler's pings go unanswered. Resolves with the upgraded socket.
 */
function silentTunnel(scheduler: Scheduler, id: string): Promise<Duplex> {
  return new Promise((resolve, reject) => {
    const req = http.request(`${scheduler.url}${CONNECT_PATH}`, {
      agent: false,
      headers: {
        connection: 'Upgrade',
        upgrade: TUNNEL_UPGRADE,
        authorization: `Bearer ${TOKEN}`,
        'x-runtime-info': encodeInfo(runtimeInfo(id)),
      },
    });
    req.once('upgrade', (_res, socket) => (socket.on('error', () => {}), resolve(socket)));
    req.once('response', (res) => reject(new Error(`not upgraded: ${res.statusCode}`)));
    req.once('error', reject);
    req.end();
  });
}

describe("the scheduler's tunnel lines", () => {
  const open: { dialers: TunnelDialer[]; schedulers: Scheduler[]; sockets: Duplex[] } = {
    dialers: [],
    schedulers: [],
    sockets: [],
  };
  afterEach(async () => {
    for (const d of open.dialers.splice(0)) await d.close();
    for (const s of open.sockets.splice(0)) s.destroy();
    for (const s of open.schedulers.splice(0)) await s.close();
  });
  /** A scheduler that pings every PING_MS on `clock`, its pings timing out far later; its clock counts them. */
  async function pingingScheduler(clock: ManualClock): Promise<{ scheduler: Scheduler; schedulerSide: CountingClock }> {
    const schedulerSide = countingClock(clock);
    const scheduler = await startScheduler({
      clock: schedulerSide.clock,
      pingIntervalMs: PING_MS,
      pingTimeoutMs: 60 * PING_MS,
    });
    open.schedulers.push(scheduler);
    return { scheduler, schedulerSide };
  }

  it('of a runtime whose tunnels flap are held back after the first three, one pair per interval, with unlogged', async () => {
    const clock = new ManualClock();
    const { scheduler, schedulerSide } = await pingingScheduler(clock);
    const runtime = countingClock(clock);
    const tunnels: Tunnel[] = [];
    let keep = false;
    scheduler.events.on('tunnel', (t: Tunnel) => {
      tunnels.push(t);
      if (!keep) t.close('dropped after the upgrade');
    });
    const dialer = redialingDialer(scheduler, runtime.clock, 'rt-loud');
    open.dialers.push(dialer);
    /** Waits for tunnel `n` to be lost to the runtime, then runs its redial. */
    const flap = async (n: number, advanceMs = REDIAL_MS): Promise<void> => {
      await until(() => runtime.redials() === n);
      await manual(advanceMs);
    };
    const manual = (ms: number): Promise<void> => clock.advance(ms);

    const pair = (unlogged?: number): [string, number | undefined][] => [
      ['tunnel open', unlogged],
      ['tunnel closed', undefined],
    ];
    const held = 7;
    for (let n = 1; n <= FLAPS_LOGGED + held; n++) await flap(n);
    await until(() => tunnels.length === FLAPS_LOGGED + held + 1);
    assert.deepEqual(tunnelLines(scheduler.logs, 'rt-loud'), [...pair(), ...pair(), ...pair()], 'three, then none');
    assert.ok(tunnels.slice(FLAPS_LOGGED).every((t) => t.quiet) && !tunnels[0]!.quiet);

    // Five minutes after the third: one pair, counting those held back.
    await flap(FLAPS_LOGGED + held + 1, FLAP_LOG_INTERVAL_MS);
    await until(() => tunnels.length === FLAPS_LOGGED + held + 2);
    assert.deepEqual(tunnelLines(scheduler.logs, 'rt-loud').slice(6), pair(held + 1));

    // One more held back; then one, held back too, stays up and answers two pings: flapping is over, it is
    // logged then, counting the other.
    await flap(FLAPS_LOGGED + held + 2);
    await until(() => tunnels.length === FLAPS_LOGGED + held + 3);
    keep = true;
    await flap(FLAPS_LOGGED + held + 3);
    await until(() => tunnels.length === FLAPS_LOGGED + held + 4 && dialer.connected);
    const last = tunnels.at(-1)!;
    assert.ok(last.quiet && tunnelLines(scheduler.logs, 'rt-loud').length === 8, 'held back at first');
    await pingRounds(clock, [schedulerSide], 1);
    assert.ok(last.quiet, 'one ping answered is not enough');
    await pingRounds(clock, [schedulerSide], 1);
    assert.ok(!last.quiet);
    assert.deepEqual(tunnelLines(scheduler.logs, 'rt-loud').slice(8), [['tunnel open', 1]]);
    last.close('lost');
    await until(() => tunnelLines(scheduler.logs, 'rt-loud').length === 10);
    assert.equal(tunnelLines(scheduler.logs, 'rt-loud')[9]![0], 'tunnel closed');
  });

  it('of a tunnel that stays up, or of one lost once, are logged as they come', async () => {
    const clock = new ManualClock();
    const { scheduler, schedulerSide } = await pingingScheduler(clock);
    const runtime = countingClock(clock);
    const tunnels: Tunnel[] = [];
    scheduler.events.on('tunnel', (t: Tunnel) => tunnels.push(t));
    const dialer = redialingDialer(scheduler, runtime.clock, 'rt-calm');
    open.dialers.push(dialer);
    // Lost at once, many times over, each after a good while up, two pings answered: no flapping, every line
    // logged.
    for (let n = 1; n <= FLAPS_LOGGED + 2; n++) {
      await until(() => tunnels.length === n && dialer.connected);
      await pingRounds(clock, [schedulerSide], 2);
      tunnels[n - 1]!.close('lost');
      await until(() => runtime.redials() === n);
      await clock.advance(REDIAL_MS);
    }
    await until(() => tunnels.length === FLAPS_LOGGED + 3);
    const lines = tunnelLines(scheduler.logs, 'rt-calm');
    assert.equal(lines.length, 2 * (FLAPS_LOGGED + 2) + 1);
    assert.ok(lines.every(([, unlogged]) => unlogged === undefined));
  });

  it("judge a tunnel as the runtime's dialer does: one ping answered each way is a flap, two a good tunnel", async () => {
    const clock = new ManualClock();
    // Both ends ping every PING_MS on the one clock; their pings time out far later.
    const { scheduler, schedulerSide } = await pingingScheduler(clock);
    const tunnels: Tunnel[] = [];
    scheduler.events.on('tunnel', (t: Tunnel) => tunnels.push(t));
    const runtime = countingClock(clock);
    const { logger, lines: runtimeLogs } = captureLogger();
    const dialer = dialTunnel({
      url: scheduler.url,
      token: TOKEN,
      info: runtimeInfo('rt-judged'),
      handler: (_req, res) => res.end(),
      clock: runtime.clock,
      logger,
      random: () => 0,
      backoff: { initialMs: REDIAL_MS, maxMs: REDIAL_MS },
      pingIntervalMs: PING_MS,
      pingTimeoutMs: 60 * PING_MS,
    });
    open.dialers.push(dialer);
    const schedulerLines = (): string[] => tunnelLines(scheduler.logs, 'rt-judged').map(([msg, n]) => `${msg} ${n}`);
    const runtimeLines = (): string[] =>
      runtimeLogs
        .filter((l) => l.msg.startsWith('tunnel '))
        .map((l) => `${l.msg} ${(l.obj as { unlogged?: number }).unlogged}`);

    // Each up two ping intervals with one ping answered each way (the first goes out one interval in and is
    // answered once the clock stands at two, so the second is not due yet), then lost.
    for (let n = 1; n <= FLAPS_LOGGED + 1; n++) {
      await until(() => tunnels.length === n && dialer.connected);
      const before = [schedulerSide.pings(), runtime.pings()];
      await clock.advance(2 * PING_MS);
      await until(() => schedulerSide.pings() === before[0]! + 1 && runtime.pings() === before[1]! + 1);
      tunnels[n - 1]!.close('lost');
      await until(() => runtime.redials() === n);
      await clock.advance(REDIAL_MS);
    }
    const flapped = (up: string, down: string): string[] =>
      [1, 2, 3].flatMap(() => [`${up} undefined`, `${down} undefined`]);
    assert.deepEqual(
      runtimeLines(),
      flapped('tunnel connected', 'tunnel disconnected'),
      'the runtime: three, then none',
    );
    assert.deepEqual(schedulerLines(), flapped('tunnel open', 'tunnel closed'), 'the scheduler: three, then none');

    // The next one stays up: one ping answered each way is not enough on either side, the second is on both.
    await until(() => tunnels.length === FLAPS_LOGGED + 2 && dialer.connected);
    await pingRounds(clock, [schedulerSide, runtime], 1);
    assert.equal(runtimeLines().length, 6, 'the runtime: held back after one ping');
    assert.equal(schedulerLines().length, 6, 'the scheduler: held back after one ping');
    await pingRounds(clock, [schedulerSide, runtime], 1);
    await until(() => runtimeLines().length === 7 && schedulerLines().length === 7);
    assert.equal(runtimeLines()[6], 'tunnel connected 1');
    assert.equal(schedulerLines()[6], 'tunnel open 1');
  });

  it('of a runtime whose tunnels answer no ping, each lost to the ping timeout, are held back as flaps', async () => {
    // The default ping timeout: a silent tunnel is lost two ping intervals after it opened, when one that
    // stayed up would answer its second ping. Up that long without one ping answered, it is no good tunnel.
    const clock = new ManualClock();
    const scheduler = await startScheduler({ clock, pingIntervalMs: PING_MS });
    open.schedulers.push(scheduler);
    const closed: string[] = [];
    scheduler.events.on('closed', (_t: Tunnel, reason: string) => closed.push(reason));
    const tunnels = FLAPS_LOGGED + 2;
    for (let n = 1; n <= tunnels; n++) {
      open.sockets.push(await silentTunnel(scheduler, 'rt-silent'));
      await until(() => scheduler.endpoint.get('rt-silent') !== undefined);
      await clock.advance(2 * PING_MS);
      await until(() => closed.length === n);
    }
    assert.ok(
      closed.every((r) => /no ping answer/.test(r)),
      closed.join(' | '),
    );
    const pair: [string, number | undefined][] = [
      ['tunnel open', undefined],
      ['tunnel closed', undefined],
    ];
    assert.deepEqual(tunnelLines(scheduler.logs, 'rt-silent'), [...pair, ...pair, ...pair], 'three, then none');
  });
});
