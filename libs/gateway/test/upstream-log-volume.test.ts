// A runtime that fails every request fails them all alike until it is
// fixed or goes: a log line per request would bury the gateway's log
// (thousands a second under load). The gateway says so once per runtime
// and message per interval, with the count held back (throttled-log.test.ts).
import { createServer } from 'node:http';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createGateway } from '@switchyard/gateway';
import type { Gateway, GatewayOptions } from '@switchyard/gateway';
import { replicaStandIn, startStandIn } from './fixtures/replica-stand-in.ts';
import { startSchedulerDouble } from './fixtures/scheduler-double.ts';
import type { DoubleRuntime, SchedulerDouble } from './fixtures/scheduler-double.ts';
import { INITIALIZE, listen, post, stopServer } from './harness.ts';

const REQUESTS = 20;
const CALL = { jsonrpc: '2.0', id: 9, method: 'tools/call', params: { name: 'echo', arguments: { text: 'x' } } };
const STATELESS = { 'mcp-protocol-version': '2026-07-28', 'x-switchyard-process': 'p1' };

interface Line {
  readonly level: string;
  readonly obj: Record<string, unknown>;
  readonly msg?: string;
}

function recorder(): { lines: Line[]; logger: NonNullable<GatewayOptions['logger']> } {
  const lines: Line[] = [];
  const at =
    (level: string) =>
    (obj: object, msg?: string): void =>
      void lines.push({ level, obj: obj as Record<string, unknown>, ...(msg ? { msg } : {}) });
  return { lines, logger: { debug: at('debug'), info: at('info'), warn: at('warn'), error: at('error') } };
}

const said = (lines: readonly Line[], msg: string): Line[] => lines.filter((l) => l.level !== 'debug' && l.msg === msg);

/** A direct-mode gateway whose scheduler double offers `runtimes`, logging to `logger`. */
async function gatewayOver(
  runtimes: DoubleRuntime[],
  logger: NonNullable<GatewayOptions['logger']>,
  upstreamMode: GatewayOptions['upstreamMode'] = 'direct',
): Promise<{ url: string; scheduler: SchedulerDouble; close(): Promise<void> }> {
  const scheduler = await startSchedulerDouble(runtimes);
  const gateway: Gateway = createGateway({ schedulers: [scheduler.url], upstreamMode, logger });
  const { server, url } = await listen(gateway);
  return {
    url,
    scheduler,
    async close() {
      await stopServer(server);
      await gateway.close();
      await scheduler.close();
    },
  };
}

async function listening(server: Server): Promise<string> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

describe('a runtime that resets every request it receives', () => {
  const { lines, logger } = recorder();
  let received = 0;
  // Reads each request whole, then cuts the connection before a response head.
  const runtime = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      received++;
      res.socket?.destroy();
    });
  });
  let front: Awaited<ReturnType<typeof gatewayOver>>;
  before(async () => (front = await gatewayOver([{ id: 'rt-reset', address: await listening(runtime) }], logger)));
  after(async () => {
    await front.close();
    runtime.closeAllConnections();
    await new Promise((resolve) => runtime.close(resolve));
  });

  it(`writes one line for ${REQUESTS} requests it cut, not one each`, async () => {
    for (let i = 0; i < REQUESTS; i++) assert.equal((await post(front.url, CALL, STATELESS)).status, 502);
    assert.equal(received, REQUESTS, 'each request reached the runtime');
    const warned = said(lines, 'upstream failed after the request was sent');
    assert.equal(warned.length, 1, JSON.stringify(warned));
    assert.equal(warned[0]!.level, 'warn');
    assert.equal(warned[0]!.obj.runtime, 'rt-reset');
    assert.match(String(warned[0]!.obj.err), /socket hang up|other side closed|ECONNRESET/);
  });
});

describe('runtimes that cannot be dialled', () => {
  const { lines, logger } = recorder();
  let front: Awaited<ReturnType<typeof gatewayOver>>;
  before(async () => {
    // Ports 1 and 2 on loopback, where nothing listens: every dial is refused, so each initialize is
    // rescheduled. Not a port just freed: port 0 hands it to the next listener of a test running beside.
    const closed = [
      { id: 'rt-a', address: 'http://127.0.0.1:1' },
      { id: 'rt-b', address: 'http://127.0.0.1:2' },
    ];
    front = await gatewayOver(closed, logger);
  });
  after(() => front.close());

  it(`writes one line per runtime for ${REQUESTS} initializes rescheduled off it, not one each`, async () => {
    for (let i = 0; i < REQUESTS; i++) assert.equal((await post(front.url, INITIALIZE)).status, 503);
    assert.ok(front.scheduler.calls.length >= 2 * REQUESTS, 'each initialize was placed on both runtimes');
    const warned = said(lines, 'initialize rescheduled');
    assert.deepEqual(warned.map((l) => l.obj.runtime).sort(), ['rt-a', 'rt-b'], JSON.stringify(warned));
    assert.ok(warned.every((l) => l.level === 'warn' && l.obj.outcome === 'unreachable'));
  });
});

describe('a scheduler replica that dies with the tunnel of a runtime many sessions are on', () => {
  const { lines, logger } = recorder();
  const served: string[] = [];
  const [replicaA, replicaB] = [replicaStandIn('a', served), replicaStandIn('b', served)];
  let front: Awaited<ReturnType<typeof gatewayOver>>;
  let addressB: string;
  before(async () => {
    const addressA = await startStandIn(replicaA);
    addressB = await startStandIn(replicaB);
    front = await gatewayOver([{ id: 'rt-1', address: addressA }], logger, 'proxy');
  });
  after(async () => {
    await front.close();
    for (const replica of [replicaA, replicaB]) {
      replica.closeAllConnections();
      replica.close();
    }
  });

  it(`writes one line for ${REQUESTS} sessions that follow the runtime to another replica, not one each`, async () => {
    const sessions: Record<string, string>[] = [];
    for (let i = 0; i < REQUESTS; i++) {
      const opened = await post(front.url, INITIALIZE);
      assert.equal(opened.status, 200, JSON.stringify(opened.json));
      sessions.push({ 'mcp-session-id': opened.headers.get('mcp-session-id')! });
    }
    replicaA.closeAllConnections();
    await new Promise((resolve) => replicaA.close(resolve));
    // The runtime redialled replica b.
    front.scheduler.runtimes = [{ id: 'rt-1', address: addressB }];
    for (const session of sessions) {
      const moved = await post(front.url, CALL, session);
      assert.deepEqual(moved.json, { jsonrpc: '2.0', id: 9, result: { replica: 'b' } });
    }
    const told = said(lines, 'runtime found through another replica');
    assert.equal(told.length, 1, JSON.stringify(told));
    assert.equal(told[0]!.level, 'info');
    assert.equal(told[0]!.obj.runtime, 'rt-1');
  });
});
