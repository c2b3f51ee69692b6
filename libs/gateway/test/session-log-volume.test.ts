// A client can send any Mcp-Session-Id it likes, as often as it likes: one
// no runtime knows (made up, or ended long ago) is answered 404 on every
// request. Those answers are the client's business, not an operator's: the
// gateway must not write a log line at info or above for each one, or a
// client alone fills the disk. It says so once per runtime and interval,
// with the count held back (throttled-log.test.ts).
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createGateway } from '@switchyard/gateway';
import type { Gateway, GatewayOptions } from '@switchyard/gateway';
import type { Server } from 'node:http';
import { startSchedulerDouble } from './fixtures/scheduler-double.ts';
import type { SchedulerDouble } from './fixtures/scheduler-double.ts';
import { listen, post, startHarness, stopServer } from './harness.ts';
import type { Harness } from './harness.ts';

const LIST = { jsonrpc: '2.0', id: 7, method: 'tools/list' };
const REQUESTS = 20;

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

const loud = (lines: readonly Line[]): Line[] => lines.filter((l) => l.level !== 'debug');

describe('log volume of requests naming sessions no runtime holds', () => {
  describe('a runtime answers that it does not know the session', () => {
    const { lines, logger } = recorder();
    let h: Harness;
    before(async () => {
      h = await startHarness(1, { logger });
    });
    after(() => h.close());

    it(`writes one line for ${REQUESTS} made-up session ids (ThrottledLog counts the rest)`, async () => {
      for (let i = 0; i < REQUESTS; i++) {
        const reply = await post(h.url, LIST, { 'mcp-session-id': `made-up-${i}` });
        assert.equal(reply.status, 404);
      }
      const said = loud(lines);
      assert.equal(said.length, 1, JSON.stringify(said));
      assert.equal(said[0]!.level, 'info');
      assert.equal(said[0]!.msg, 'session unknown to the runtime');
      assert.equal(said[0]!.obj.runtime, 'rt-0');
      assert.equal(said[0]!.obj.status, 404);
      assert.doesNotMatch(JSON.stringify(lines), /made-up-/, 'session ids stay out of the log');
    });
  });

  describe('no runtime can take the session', () => {
    const { lines, logger } = recorder();
    let scheduler: SchedulerDouble;
    let gateway: Gateway;
    let server: Server;
    let url: string;
    before(async () => {
      scheduler = await startSchedulerDouble([]);
      gateway = createGateway({ schedulers: [scheduler.url], upstreamMode: 'direct', logger });
      ({ server, url } = await listen(gateway));
    });
    after(async () => {
      await stopServer(server);
      await gateway.close();
      await scheduler.close();
    });

    it(`writes nothing at info or above for ${REQUESTS} made-up session ids of a class nobody serves`, async () => {
      // At once: each waits out the gateway's wait for a redialling runtime before its 404.
      const replies = await Promise.all(
        Array.from({ length: REQUESTS }, (_, i) =>
          post(url, LIST, { 'mcp-session-id': `made-up-${i}`, 'x-switchyard-class': `nobody-${i}` }),
        ),
      );
      assert.deepEqual(new Set(replies.map((r) => r.status)), new Set([404]));
      assert.deepEqual(loud(lines), []);
      assert.ok(
        lines.some((l) => l.msg === 'session lost: no runtime holds it, none can take it'),
        'still there at debug',
      );
    });
  });
});
