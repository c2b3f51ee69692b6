// Two runtimes dialling with one id and one join token: the one that runs keeps the id while its pings
// come, and the other is refused 409; the same runtime dialling again (its instance) takes its own tunnel
// over at once, as does a new one once the old tunnel's pings have stopped.
import { afterEach, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type http2 from 'node:http2';
import { ManualClock } from '@switchyard/clock/testing';
import type { Duplex } from 'node:stream';
import { dialTunnel } from '../src/index.ts';
import { HELD_ID_REDIAL_MARGIN_MS } from '../src/dialer.ts';
import type { DialTunnelOptions, TunnelDialer } from '../src/index.ts';
import {
  TOKEN,
  encodeInfo,
  rawConnect,
  readStream,
  runtimeInfo,
  startRuntime,
  startScheduler,
  until,
} from './helpers.ts';
import type { Scheduler } from './helpers.ts';

const answer =
  (name: string) =>
  (_req: http2.Http2ServerRequest, res: http2.Http2ServerResponse): void =>
    void res.end(`served by ${name}`);

/** The dialer's log lines of level error, with their fields. */
function errors(): { logger: NonNullable<DialTunnelOptions['logger']>; said: { obj: object; msg: string }[] } {
  const said: { obj: object; msg: string }[] = [];
  const logger = { info() {}, warn() {}, error: (obj: object, msg: string) => void said.push({ obj, msg }) };
  return { logger, said };
}

describe('a runtime id held by a live runtime', () => {
  let scheduler: Scheduler;
  const dialers: TunnelDialer[] = [];
  afterEach(async () => {
    await Promise.all(dialers.splice(0).map((d) => d.close()));
    await scheduler?.close();
  });

  it('refuses a second runtime with the same id and token 409, and the first keeps serving', async () => {
    scheduler = await startScheduler();
    const first = await startRuntime(scheduler, 'rt-1', answer('first'));
    dialers.push(first.dialer);
    const { logger, said } = errors();
    const second = dialTunnel({
      url: scheduler.url,
      token: TOKEN,
      info: runtimeInfo('rt-1'),
      handler: answer('second'),
      logger,
    });
    dialers.push(second);
    await until(() => said.length > 0 || first.tunnel.closed);
    assert.equal(first.tunnel.closed, false, 'the first runtime keeps its tunnel');
    assert.equal(scheduler.endpoint.get('rt-1'), first.tunnel);
    assert.equal(
      (await readStream(first.tunnel.request({ ':path': '/' }, { endStream: true }))).body,
      'served by first',
    );
    assert.equal(second.connected, false);
    const refusal = said[0]!;
    assert.match(refusal.msg, /^scheduler refused the tunnel: another runtime that runs holds this runtime's id/);
    assert.equal((refusal.obj as { status: number }).status, 409);
    const { droppedIfSilentInMs, ...body } = JSON.parse((refusal.obj as { body: string }).body) as {
      droppedIfSilentInMs: number;
    };
    assert.deepEqual(body, { error: 'runtime id held by another live runtime', runtime: 'rt-1' });
    // The default ping interval and timeout (5 s each) from the first runtime's last ping, which just came.
    assert.ok(Number.isInteger(droppedIfSilentInMs) && droppedIfSilentInMs > 0 && droppedIfSilentInMs <= 10_000);
    const warned = scheduler.logs.find((l) => l.msg === 'runtime connect refused: id held by another live runtime');
    assert.ok(warned, JSON.stringify(scheduler.logs));
  });

  it('lets the same runtime (its instance) dial again and take its own tunnel over at once', async () => {
    scheduler = await startScheduler();
    const instance = 'instance-0123456789ab';
    const first = await startRuntime(scheduler, 'rt-2', answer('old link'), { instance });
    dialers.push(first.dialer);
    const again = await startRuntime(scheduler, 'rt-2', answer('new link'), { instance });
    dialers.push(again.dialer);
    assert.match(await first.tunnel.whenClosed, /replaced/);
    assert.equal(scheduler.endpoint.get('rt-2'), again.tunnel);
    // A runtime whose link keeps breaking takes its own tunnel over again and again: no shared id to report.
    for (let n = 0; n < 3; n++)
      dialers.push((await startRuntime(scheduler, 'rt-2', answer('flap'), { instance })).dialer);
    assert.ok(!scheduler.logs.some((l) => l.msg.startsWith('runtime id used by more than one runtime')));
  });

  it("tells a new runtime when the id is free should the old tunnel's pings stop, and lets it in then", async () => {
    const clock = new ManualClock();
    // The scheduler's own pings are far apart: only the runtime's silence tells here.
    scheduler = await startScheduler({ clock, pingIntervalMs: 600_000 });
    // Its clock never moves: it announced pings every second and sends none.
    const silent = await startRuntime(scheduler, 'rt-3', answer('silent'), {
      clock: new ManualClock(),
      pingIntervalMs: 1_000,
    });
    dialers.push(silent.dialer);
    const newcomer = () =>
      rawConnect(scheduler, {
        authorization: `Bearer ${TOKEN}`,
        'x-runtime-info': encodeInfo(runtimeInfo('rt-3')),
        'x-runtime-instance': 'instance-new-0123456789',
      });
    const refused = await newcomer();
    assert.equal(refused.status, 409, 'refused while its pings may still come');
    // When the id is free should that runtime stay silent: its announced ping interval and timeout, 1 s each.
    assert.deepEqual(JSON.parse(refused.body), {
      error: 'runtime id held by another live runtime',
      runtime: 'rt-3',
      droppedIfSilentInMs: 2_000,
    });
    await clock.advance(1_500);
    const later = await newcomer();
    assert.equal(later.status, 409);
    assert.equal((JSON.parse(later.body) as { droppedIfSilentInMs: number }).droppedIfSilentInMs, 500);
    await clock.advance(501);
    assert.equal(silent.tunnel.peerQuiet, true);
    const restarted = await startRuntime(scheduler, 'rt-3', answer('restarted'));
    dialers.push(restarted.dialer);
    assert.match(await silent.tunnel.whenClosed, /replaced/);
    assert.equal(scheduler.endpoint.get('rt-3'), restarted.tunnel);
  });

  it('dials again just after the old tunnel would be dropped, not at its next backoff step', async () => {
    const clock = new ManualClock();
    scheduler = await startScheduler({ clock, pingIntervalMs: 600_000 });
    const silent = await startRuntime(scheduler, 'rt-5', answer('silent'), {
      clock: new ManualClock(),
      pingIntervalMs: 1_000,
    });
    dialers.push(silent.dialer);
    const dialerClock = new ManualClock();
    const { logger, said } = errors();
    const restarted = dialTunnel({
      url: scheduler.url,
      token: TOKEN,
      info: runtimeInfo('rt-5'),
      handler: answer('restarted'),
      clock: dialerClock,
      logger,
      random: () => 0,
      pingIntervalMs: 600_000,
    });
    dialers.push(restarted);
    await until(() => said.length > 0 && dialerClock.pendingTimers === 1);
    // Told 2 s (the silent runtime's ping interval and timeout): a little after that, not at 250 ms.
    assert.equal(dialerClock.nextDueInMs, 2_000 + HELD_ID_REDIAL_MARGIN_MS);
    const accepted = scheduler.nextTunnel('rt-5');
    await clock.advance(2_000 + HELD_ID_REDIAL_MARGIN_MS);
    await dialerClock.advance(2_000 + HELD_ID_REDIAL_MARGIN_MS);
    assert.equal(await accepted, scheduler.endpoint.get('rt-5'));
    await until(() => restarted.connected);
    assert.equal(said.length, 1, 'joined at its second dial');
  });

  // A scheduler's 409 bodies, as the dialer may meet them: its timing applies within the dialer's own bounds.
  const held = (more: object): object => ({
    error: 'runtime id held by another live runtime',
    runtime: 'rt-6',
    ...more,
  });
  const heldCases = [
    {
      name: 'at the time it names, jittered later',
      body: held({ droppedIfSilentInMs: 3_000 }),
      random: 1,
      dueMs: Math.round((3_000 + HELD_ID_REDIAL_MARGIN_MS) * 1.2),
    },
    {
      name: 'at the maximum backoff when it names more',
      body: held({ droppedIfSilentInMs: 1e12 }),
      random: 0,
      dueMs: 5_000,
    },
    {
      name: 'just after when it names no time left',
      body: held({ droppedIfSilentInMs: 0 }),
      random: 0,
      dueMs: HELD_ID_REDIAL_MARGIN_MS,
    },
    {
      name: 'at its backoff step when it names a negative time',
      body: held({ droppedIfSilentInMs: -1 }),
      random: 0,
      dueMs: 100,
    },
    {
      name: 'at its backoff step when it names no number',
      body: held({ droppedIfSilentInMs: '3000' }),
      random: 0,
      dueMs: 100,
    },
    {
      name: 'at its backoff step when it names none (held elsewhere)',
      body: held({ elsewhere: true }),
      random: 0,
      dueMs: 100,
    },
    {
      name: 'at its backoff step for another 409',
      body: { error: 'runtime id connected with another join token', runtime: 'rt-6', droppedIfSilentInMs: 3_000 },
      random: 0,
      dueMs: 100,
    },
  ];
  for (const c of heldCases) {
    it(`dials again after a 409 of a held id ${c.name}`, async () => {
      scheduler = await startScheduler();
      scheduler.server.removeAllListeners('upgrade');
      scheduler.server.on('upgrade', (_req, socket: Duplex) => {
        const body = JSON.stringify(c.body);
        socket.end(
          `HTTP/1.1 409 Conflict\r\nConnection: close\r\nContent-Type: application/json\r\n` +
            `Content-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
        );
      });
      const clock = new ManualClock();
      const { logger, said } = errors();
      const dialer = dialTunnel({
        url: scheduler.url,
        token: TOKEN,
        info: runtimeInfo('rt-6'),
        handler: answer('refused'),
        clock,
        logger,
        random: () => c.random,
        backoff: { initialMs: 100, maxMs: 5_000 },
      });
      dialers.push(dialer);
      await until(() => said.length > 0 && clock.pendingTimers === 1);
      assert.equal(clock.nextDueInMs, c.dueMs);
    });
  }

  it('lets a runtime that names no instance (an earlier release) take the id over, as before', async () => {
    scheduler = await startScheduler();
    const first = await startRuntime(scheduler, 'rt-4', answer('first'));
    dialers.push(first.dialer);
    const older = await rawConnect(scheduler, {
      authorization: `Bearer ${TOKEN}`,
      'x-runtime-info': encodeInfo(runtimeInfo('rt-4')),
    });
    assert.equal(older.status, 101);
    assert.match(await first.tunnel.whenClosed, /replaced/);
  });
});
