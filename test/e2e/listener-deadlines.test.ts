// The in-cluster listeners that whoever reaches the pod can dial (a
// runtime's direct and health listeners, a gateway's and a scheduler's
// metricsPort) close a client that never finishes its request's headers at
// 10 s, checked every second: with Node's defaults (60 s, checked every
// 30 s) a client sending a byte now and then, or nothing, held each
// connection up to 90 s. Processes on loopback; raw sockets.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { INTERNAL_HEADERS_TIMEOUT_MS } from '@switchyard/service';
import { heldFor, trickle } from './raw-connections.ts';
import { spawnApp, type AppProcess } from '../support/processes.ts';

/** Leeway for a loaded machine; Node's default check interval alone would add up to 30 s. */
const SLACK_MS = 5_000;
const TOKEN = 'a-join-token-0123456789abcdef';

/** A GET header block, a byte every second, never its end. */
const trickleHeaders = trickle(`GET /healthz HTTP/1.1
Host: x
X-Pad: ${'a'.repeat(100)}`);

const portOf = (url: unknown): number => Number(new URL(String(url)).port);

describe('in-cluster listeners and clients that never finish their headers', () => {
  const apps: AppProcess[] = [];
  const ports: Record<string, number> = {};

  before(async () => {
    const scheduler = await spawnApp('scheduler', 'deadlines-scheduler', [
      ...['--host', '127.0.0.1', '--port', '0', '--metrics-port', '0', '--drain-delay-ms', '0'],
      ...['--join-tokens', TOKEN],
    ]);
    apps.push(scheduler);
    ports['scheduler metricsPort'] = portOf((await scheduler.waitForLog((l) => l.msg === 'ready')).metrics);
    const runtime = await spawnApp('runtime', 'deadlines-runtime', [
      ...['--runtime-id', 'deadlines', '--scheduler-url', scheduler.url!, '--join-token', TOKEN],
      ...['--health.enabled', 'true', '--health.host', '127.0.0.1', '--health.port', '0'],
      ...['--direct-listen.enabled', 'true', '--direct-listen.host', '127.0.0.1', '--direct-listen.port', '0'],
      ...['--direct-listen.token', 'a-direct-token-0123456789abcdef', '--drain-delay-ms', '0'],
    ]);
    apps.push(runtime);
    const ready = await runtime.waitForLog((l) => l.msg === 'ready');
    ports['runtime health'] = portOf(ready.health);
    ports['runtime direct'] = portOf(ready.direct);
    const gateway = await spawnApp('gateway', 'deadlines-gateway', [
      ...['--host', '127.0.0.1', '--port', '0', '--schedulers', 'http://127.0.0.1:9'],
      ...['--metrics-port', '0', '--drain-delay-ms', '0'],
    ]);
    apps.push(gateway);
    ports['gateway metricsPort'] = portOf((await gateway.waitForLog((l) => l.msg === 'ready')).metrics);
  });
  after(() => Promise.all(apps.map((a) => a.stop())));

  it('closes one trickling its headers, and one sending nothing, at 10 s on each', async () => {
    const limitMs = INTERNAL_HEADERS_TIMEOUT_MS + SLACK_MS;
    const held = await Promise.all(
      Object.entries(ports).flatMap(([name, port]) => [
        heldFor(`${name}, trickling`, port, trickleHeaders, limitMs).then((ms) => [`${name}, trickling`, ms] as const),
        heldFor(`${name}, silent`, port, () => () => {}, limitMs).then((ms) => [`${name}, silent`, ms] as const),
      ]),
    );
    for (const [name, ms] of held) {
      // Not sooner either: a client that sends its headers within the deadline is served.
      assert.ok(ms >= INTERNAL_HEADERS_TIMEOUT_MS - 1000, `${name}: closed after ${Math.round(ms)} ms`);
    }
    assert.equal(held.length, 8);
  });
});
