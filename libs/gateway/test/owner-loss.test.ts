// A session whose route goes through a scheduler replica that can no longer
// be dialled (it died with the runtime's tunnel on it): nothing was sent, and
// the runtime may be redialling another replica. The gateway asks the
// scheduler again for up to 3 s and follows the runtime to its new replica;
// it declares the session lost (404) only when the runtime does not show up
// again, and answers 503 when no scheduler answers (which says nothing of the
// runtime). Replicas here are stand-ins serving /api/proxy/<runtime>/mcp that
// refuse relays as an older release does, so requests go through /api/proxy.
import type { Server } from 'node:http';
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { systemClock, type Clock } from '@switchyard/clock';
import { createGateway } from '@switchyard/gateway';
import type { Gateway } from '@switchyard/gateway';
import { replicaStandIn, startStandIn as start } from './fixtures/replica-stand-in.ts';
import { startSchedulerDouble } from './fixtures/scheduler-double.ts';
import type { SchedulerDouble } from './fixtures/scheduler-double.ts';
import { INITIALIZE, listen, post, stopServer } from './harness.ts';

const ECHO = { jsonrpc: '2.0', id: 7, method: 'tools/call', params: { name: 'echo', arguments: {} } };

/** Every replica stand-in started, for the suite's teardown. */
const replicas: Server[] = [];

/** A replica stand-in, kept for the suite's teardown. */
function replica(name: string, served: string[]): Server {
  const server = replicaStandIn(name, served);
  replicas.push(server);
  return server;
}

describe('a session whose scheduler replica can no longer be dialled', () => {
  const served: string[] = [];
  const replicaA = replica('a', served);
  const replicaB = replica('b', served);
  let scheduler: SchedulerDouble;
  let gateway: Gateway;
  let url: string;
  let server: Server;
  let addressB: string;
  before(async () => {
    const addressA = await start(replicaA);
    addressB = await start(replicaB);
    scheduler = await startSchedulerDouble([{ id: 'rt-1', address: addressA }]);
    gateway = createGateway({ schedulers: [scheduler.url], upstreamMode: 'proxy' });
    ({ server, url } = await listen(gateway));
  });
  after(async () => {
    await stopServer(server);
    await gateway.close();
    for (const s of replicas) {
      s.closeAllConnections();
      s.close();
    }
    await scheduler.close().catch(() => {});
  });

  const openSession = async (): Promise<Record<string, string>> => {
    const opened = await post(url, INITIALIZE);
    assert.equal(opened.status, 200, JSON.stringify(opened.json));
    return { 'mcp-session-id': opened.headers.get('mcp-session-id')! };
  };
  const stop = async (s: Server): Promise<void> => {
    s.closeAllConnections();
    await new Promise((resolve) => s.close(resolve));
  };

  it('follows its runtime to the replica it redialled, and keeps the session', async () => {
    const session = await openSession();
    assert.deepEqual(served, ['a']);
    await stop(replicaA);
    // The runtime now shows through replica b.
    scheduler.runtimes = [{ id: 'rt-1', address: addressB }];
    const calls = scheduler.calls.length;
    const moved = await post(url, ECHO, session);
    assert.equal(moved.status, 200, JSON.stringify(moved.json));
    assert.deepEqual(moved.json, { jsonrpc: '2.0', id: 7, result: { replica: 'b' } });
    assert.equal(scheduler.calls.at(-1)?.threadId, session['mcp-session-id'], 'asked for the session’s thread');
    assert.ok(scheduler.calls.length > calls);
    const afterMove = scheduler.calls.length;
    const next = await post(url, ECHO, session);
    assert.equal(next.status, 200);
    assert.equal(scheduler.calls.length, afterMove, 'the new route was cached');
  });

  it('follows a named stateless process the same way', async () => {
    const [replicaD, replicaE] = [replica('d', served), replica('e', served)];
    const [addressD, addressE] = [await start(replicaD), await start(replicaE)];
    scheduler.runtimes = [{ id: 'rt-1', address: addressD }];
    const stateless = { 'mcp-protocol-version': '2026-07-28', 'x-switchyard-process': 'p1' };
    const first = await post(url, ECHO, stateless);
    assert.deepEqual(first.json, { jsonrpc: '2.0', id: 7, result: { replica: 'd' } });
    await stop(replicaD);
    scheduler.runtimes = [
      { id: 'rt-1', address: addressE },
      { id: 'rt-2', address: addressE },
    ];
    const moved = await post(url, ECHO, stateless);
    assert.deepEqual(moved.json, { jsonrpc: '2.0', id: 7, result: { replica: 'e' } });
    assert.equal(scheduler.calls.at(-1)?.exclude, undefined, 'its runtime was not excluded');
  });

  it('loses the session (404) once its runtime has not shown elsewhere for 3 s, asking all along', async () => {
    scheduler.runtimes = [{ id: 'rt-1', address: addressB }];
    const session = await openSession();
    await stop(replicaB);
    // Still placed behind the dead replica (an epoch that has not moved on), then on no runtime at all.
    const calls = scheduler.calls.length;
    const started = performance.now();
    setTimeout(() => (scheduler.runtimes = []), 1_000);
    const lost = await post(url, ECHO, session);
    assert.equal(lost.status, 404, JSON.stringify(lost.json));
    assert.equal((lost.json as { error: { data: { reason: string } } }).error.data.reason, 'session_not_found');
    assert.ok(performance.now() - started >= 2_900, 'waited for the runtime');
    assert.ok(scheduler.calls.length - calls >= 5, `asked ${scheduler.calls.length - calls} times`);
  });

  it('answers 503 when no scheduler answers either, without declaring the session lost', async () => {
    const replicaC = replica('c', served);
    scheduler.runtimes = [{ id: 'rt-1', address: await start(replicaC) }];
    const session = await openSession();
    await stop(replicaC);
    await scheduler.close();
    const res = await post(url, ECHO, session);
    assert.equal(res.status, 503, JSON.stringify(res.json));
    assert.equal((res.json as { error: { data: { reason: string } } }).error.data.reason, 'not_ready');
    assert.equal(res.headers.get('retry-after'), '1');
  });
});

describe('a session whose scheduler replica can no longer be dialled, when the wall clock steps', () => {
  const served: string[] = [];
  const [replicaF, replicaG] = [replica('f', served), replica('g', served)];
  /** The system clock, its wall reading stepped by `wallStepMs`, as NTP or an operator would. */
  let wallStepMs = 0;
  const clock: Clock = { ...systemClock, now: () => Date.now() + wallStepMs };
  let scheduler: SchedulerDouble;
  let gateway: Gateway;
  let server: Server;
  let url: string;
  after(async () => {
    await stopServer(server);
    await gateway.close();
    await scheduler.close().catch(() => {});
    for (const s of [replicaF, replicaG]) {
      s.closeAllConnections();
      s.close();
    }
  });

  it('still waits for its runtime to show elsewhere after a step forward', async () => {
    const addressG = await start(replicaG);
    scheduler = await startSchedulerDouble([{ id: 'rt-1', address: await start(replicaF) }]);
    gateway = createGateway({ schedulers: [scheduler.url], upstreamMode: 'proxy', clock });
    ({ server, url } = await listen(gateway));
    const opened = await post(url, INITIALIZE);
    assert.equal(opened.status, 200);
    replicaF.closeAllConnections();
    await new Promise((resolve) => replicaF.close(resolve));
    // The first ask after the loss still shows the dead replica; the wall clock is then set forward an hour.
    // The second shows the runtime redialled behind replica g.
    let asked = 0;
    const record = scheduler.calls.push.bind(scheduler.calls);
    scheduler.calls.push = (...requests) => {
      asked++;
      if (asked === 1) wallStepMs = 3_600_000;
      if (asked === 2) scheduler.runtimes = [{ id: 'rt-1', address: addressG }];
      return record(...requests);
    };
    const moved = await post(url, ECHO, { 'mcp-session-id': opened.headers.get('mcp-session-id')! });
    assert.equal(moved.status, 200, JSON.stringify(moved.json));
    assert.deepEqual(moved.json, { jsonrpc: '2.0', id: 7, result: { replica: 'g' } });
  });
});
