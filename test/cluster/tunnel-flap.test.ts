// A runtime process whose every tunnel is dropped right after the upgrade (a
// proxy in between that cuts upgraded connections): it redials with its
// backoff growing from tunnel to tunnel, not every 250 ms, and logs its
// first three tunnels coming and going, not one pair per redial. The stand-in is a
// loopback server that answers each upgrade with a 101 and closes.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { spawnApp, until, type AppProcess } from '../support/processes.ts';

/** The dialer's default backoff: 250 ms doubling, each delay shortened by up to 20 %. */
const FIRST_DELAY_MS = 250;
const JITTER = 0.2;
/** Upgrades watched: five redials, 7.75 s at most of backoff. */
const UPGRADES = 6;
/** Flapping tunnels logged in full (libs/tunnel's FLAPS_LOGGED); the rest within 5 min are not. */
const FLAPS_LOGGED = 3;
/** Node may fire a timer a millisecond early by the clock measured here. */
const TIMER_SLACK_MS = 5;

describe('a runtime whose tunnels a proxy drops right after the upgrade', () => {
  const server = http.createServer();
  const upgradedAt: number[] = [];
  const waiters: (() => void)[] = [];
  let dir = '';
  let runtime: AppProcess | undefined;

  before(async () => {
    server.on('upgrade', (req, socket) => {
      upgradedAt.push(performance.now());
      // The runtime's HTTP/2 preface may meet the closed socket: its reset is the point here.
      socket.on('error', () => {});
      socket.end(`HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: ${req.headers.upgrade}\r\n\r\n`);
      for (const wake of waiters.splice(0)) wake();
    });
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    dir = mkdtempSync(join(tmpdir(), 'switchyard-flap-'));
    const config = join(dir, 'runtime.json');
    writeFileSync(config, JSON.stringify({ classes: { demo: { engine: 'builtin' } } }));
    runtime = await spawnApp('runtime', 'flap', [
      ...['--config', config, '--runtime-id', 'flap', '--join-token', 'flap-join-token-0123456789'],
      ...['--scheduler-url', `http://127.0.0.1:${(server.address() as AddressInfo).port}`],
      // `auto` would dial WebSocket after two such tunnels (libs/tunnel/test/auto-transport.test.ts).
      ...['--tunnel.transport', 'http2'],
    ]);
  });
  after(async () => {
    await runtime?.stop(3000);
    server.closeAllConnections();
    server.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('redials with a growing backoff and logs only its first three tunnels', async () => {
    const deadline = performance.now() + 30_000;
    while (upgradedAt.length < UPGRADES) {
      assert.ok(performance.now() < deadline, `${upgradedAt.length} upgrades within 30 s`);
      await new Promise<void>((resolve) => {
        waiters.push(resolve);
        setTimeout(resolve, 1000).unref();
      });
    }
    // Each redial waits at least the jittered delay of its step: 200, 400, 800, 1600 and 3200 ms at least.
    const gaps = upgradedAt.slice(1, UPGRADES).map((at, i) => at - upgradedAt[i]!);
    gaps.forEach((gapMs, i) => {
      const leastMs = FIRST_DELAY_MS * 2 ** i * (1 - JITTER) - TIMER_SLACK_MS;
      assert.ok(gapMs >= leastMs, `redial ${i + 1} came ${gapMs.toFixed(0)} ms after the last, not ${leastMs} ms`);
    });
    const said = (msg: string): number => runtime!.logs.filter((l) => l.msg === msg).length;
    // Lines travel a pipe: those of the first three tunnels, gone before the fourth upgrade, are awaited.
    await until('the first three tunnels logged', () => said('tunnel disconnected') >= FLAPS_LOGGED);
    assert.equal(said('tunnel connected'), FLAPS_LOGGED, `only the first ${FLAPS_LOGGED} of ${UPGRADES} logged`);
    assert.equal(said('tunnel disconnected'), FLAPS_LOGGED);
  });
});
