// A legacy session's request that a gateway holds no route for (another
// replica opened it, without a shared Redis, or its route was dropped), when
// the scheduler can place it nowhere: its runtime died and no other runtime
// can take work (none left, or all full). The session is lost, so the client
// must hear 404 and re-initialize, as when a survivor answers for it; a 503
// would have it wait for a session that never comes back. The runtime may
// also be redialling (its scheduler replica died), so the gateway first asks
// again for as long as it waits for a runtime behind a lost replica.
import type { Server } from 'node:http';
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createGateway } from '@switchyard/gateway';
import type { Gateway } from '@switchyard/gateway';
import { startRuntime } from './fixtures/runtime.ts';
import type { TestRuntime } from './fixtures/runtime.ts';
import { startSchedulerDouble } from './fixtures/scheduler-double.ts';
import type { SchedulerDouble } from './fixtures/scheduler-double.ts';
import { INITIALIZE, listen, post, stopServer } from './harness.ts';
import { until } from './until.ts';

const LIST = { jsonrpc: '2.0', id: 9, method: 'tools/list' };
const VERSION = { 'mcp-protocol-version': '2025-06-18' };

describe('a session request no runtime can be placed for, on a gateway without its route', () => {
  let scheduler: SchedulerDouble;
  /** Opens the sessions. */
  let opener: Gateway;
  /** Another replica: it never saw them. */
  let other: Gateway;
  const servers: Server[] = [];
  const runtimes: TestRuntime[] = [];
  let openerUrl: string;
  let otherUrl: string;
  before(async () => {
    scheduler = await startSchedulerDouble([]);
    opener = createGateway({ schedulers: [scheduler.url], upstreamMode: 'direct' });
    other = createGateway({ schedulers: [scheduler.url], upstreamMode: 'direct' });
    for (const [gateway, set] of [
      [opener, (url: string) => (openerUrl = url)],
      [other, (url: string) => (otherUrl = url)],
    ] as const) {
      const { server, url } = await listen(gateway);
      servers.push(server);
      set(url);
    }
  });
  after(async () => {
    for (const server of servers) await stopServer(server);
    await Promise.all([opener.close(), other.close()]);
    await Promise.all(runtimes.map((r) => r.close()));
    await scheduler.close();
  });

  /** A session opened through `opener` on a runtime of its own, which the test may stop. */
  const openOn = async (id: string): Promise<{ runtime: TestRuntime; session: Record<string, string> }> => {
    const runtime = await startRuntime(id);
    runtimes.push(runtime);
    scheduler.full = false;
    scheduler.runtimes = [{ id, address: runtime.address }];
    const opened = await post(openerUrl, INITIALIZE);
    assert.equal(opened.status, 200, JSON.stringify(opened.json));
    return { runtime, session: { 'mcp-session-id': opened.headers.get('mcp-session-id')!, ...VERSION } };
  };

  const lostCases = [
    { name: 'none is left', fleet: async () => void (scheduler.runtimes = []) },
    {
      name: 'every other one is full',
      fleet: async () => {
        const busy = await startRuntime('rt-busy');
        runtimes.push(busy);
        scheduler.runtimes = [{ id: busy.id, address: busy.address }];
        scheduler.full = true;
      },
    },
  ];
  for (const c of lostCases) {
    it(`answers 404 so the client re-initializes when its runtime died and ${c.name}`, async () => {
      const { runtime, session } = await openOn(`rt-dies-${lostCases.indexOf(c)}`);
      await runtime.close();
      await c.fleet();
      const asked = scheduler.calls.length;
      const res = await post(otherUrl, LIST, session);
      assert.equal(res.status, 404, JSON.stringify(res.json));
      const body = res.json as { id: unknown; error: { code: number; message: string } };
      assert.equal(body.id, 9);
      assert.equal(body.error.code, -32001);
      assert.match(body.error.message, /^Session not found: .*; re-initialize$/);
      assert.equal(scheduler.calls.at(-1)?.threadId, session['mcp-session-id'], 'asked for the session’s thread');
      assert.ok(scheduler.calls.length - asked >= 2, 'asked again before declaring the session lost');
    });
  }

  it('keeps a session whose runtime shows again while it asks (a runtime redialling)', async () => {
    const { runtime, session } = await openOn('rt-redials');
    const shown = scheduler.runtimes;
    scheduler.runtimes = [];
    const asked = scheduler.calls.length;
    const answer = post(otherUrl, LIST, session);
    await until(() => scheduler.calls.length > asked, 'the first ask');
    scheduler.runtimes = shown;
    const res = await answer;
    assert.equal(res.status, 200, JSON.stringify(res.json));
    // The runtime answers as an event stream: its one event carries the tool list.
    assert.match(String(res.json), /"name":"echo"/, 'the session’s runtime answered');
    assert.equal(runtime.seen.at(-1)?.headers['x-switchyard-session-id'], session['mcp-session-id']);
  });
});
