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
): Promise<{ url: string; scheduler: SchedulerDouble; close(): Promise<void> }> {
  const scheduler = await startSchedulerDouble(runtimes);
  const gateway: Gateway = createGateway({ schedulers: [scheduler.url], upstreamMode: 'direct', logger });
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
    // Two addresses nothing listens on any more: every dial is refused, so each initialize is rescheduled.
    const closed = await Promise.all(
      ['rt-a', 'rt-b'].map(async (id) => {
        const server = createServer();
        const address = await listening(server);
        await new Promise((resolve) => server.close(resolve));
        return { id, address };
      }),
    );
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
