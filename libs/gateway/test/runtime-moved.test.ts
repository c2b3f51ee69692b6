// A session whose runtime redialled another scheduler replica (after a
// restart, or a broken connection) while the replica its route names stayed
// up: that replica forwards each of its requests to the new owner and says so
// (X-Switchyard-Forwarded). The gateway then asks the scheduler where the
// runtime is reached now and routes there, so the extra hop lasts one
// request, not the session. Replicas here are stand-ins (see
// fixtures/replica-stand-in.ts); the real forwarding is covered in
// test/e2e/tunnel-owner-failure.test.ts.
import type { Server } from 'node:http';
import { after, before, beforeEach, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createGateway } from '@switchyard/gateway';
import type { Gateway } from '@switchyard/gateway';
import { FORWARDED_HEADER } from '@switchyard/protocol';
import { replicaStandIn, startStandIn } from './fixtures/replica-stand-in.ts';
import { startSchedulerDouble } from './fixtures/scheduler-double.ts';
import type { SchedulerDouble } from './fixtures/scheduler-double.ts';
import { INITIALIZE, listen, post, stopServer } from './harness.ts';
import { until } from './until.ts';

const ECHO = { jsonrpc: '2.0', id: 7, method: 'tools/call', params: { name: 'echo', arguments: {} } };
const STATELESS = { 'mcp-protocol-version': '2026-07-28', 'x-switchyard-process': 'p1' };

describe('a runtime that moved to another scheduler replica', () => {
  const served: string[] = [];
  /** Replica a forwards (its runtime moved to b) while this is true. */
  let moved = false;
  const replicaA = replicaStandIn('a', served, { forwarding: () => moved });
  const replicaB = replicaStandIn('b', served);
  let addressA: string;
  let addressB: string;
  let scheduler: SchedulerDouble;
  let gateway: Gateway;
  let url: string;
  let server: Server;
  before(async () => {
    [addressA, addressB] = [await startStandIn(replicaA), await startStandIn(replicaB)];
    scheduler = await startSchedulerDouble([]);
    gateway = createGateway({ schedulers: [scheduler.url], upstreamMode: 'proxy' });
    ({ server, url } = await listen(gateway));
  });
  beforeEach(() => {
    moved = false;
    served.length = 0;
    scheduler.runtimes = [{ id: 'rt-1', address: addressA }];
  });
  after(async () => {
    await stopServer(server);
    await gateway.close();
    for (const s of [replicaA, replicaB]) {
      s.closeAllConnections();
      s.close();
    }
    await scheduler.close();
  });

  const openSession = async (): Promise<Record<string, string>> => {
    const opened = await post(url, INITIALIZE);
    assert.equal(opened.status, 200, JSON.stringify(opened.json));
    return { 'mcp-session-id': opened.headers.get('mcp-session-id')! };
  };
  /** The runtime redialled replica b; replica a, still up, forwards to it. */
  const move = (to = addressB): void => {
    moved = true;
    scheduler.runtimes = [{ id: 'rt-1', address: to }];
  };
  const replicaOf = (answer: { json: unknown }): string =>
    (answer.json as { result: { replica: string } }).result.replica;

  it('routes a session to the new replica after one forwarded request, which the client gets whole', async () => {
    const session = await openSession();
    move();
    const followed = gateway.stats().routesFollowed;
    const forwarded = await post(url, ECHO, session);
    assert.equal(forwarded.status, 200);
    assert.equal(replicaOf(forwarded), 'a');
    assert.equal(forwarded.headers.get(FORWARDED_HEADER), null, 'the marker is for the gateway only');
    await until(() => gateway.stats().routesFollowed > followed, 'the route follows the runtime');
    assert.equal(scheduler.calls.at(-1)?.threadId, session['mcp-session-id'], 'asked for the session’s thread');
    for (let i = 0; i < 3; i++) assert.equal(replicaOf(await post(url, ECHO, session)), 'b');
    assert.deepEqual(served, ['a', 'a', 'b', 'b', 'b']);
  });

  it('routes a named stateless process the same way', async () => {
    assert.equal(replicaOf(await post(url, ECHO, STATELESS)), 'a');
    move();
    const followed = gateway.stats().routesFollowed;
    assert.equal(replicaOf(await post(url, ECHO, STATELESS)), 'a');
    await until(() => gateway.stats().routesFollowed > followed, 'the route follows the runtime');
    assert.equal(replicaOf(await post(url, ECHO, STATELESS)), 'b');
  });

  it('keeps the route when the scheduler still names the same replica, or another runtime', async () => {
    const session = await openSession();
    const followed = gateway.stats().routesFollowed;
    /** Forwarded requests until the scheduler was asked again (one ask at a time per session). */
    const askedAgain = async (): Promise<void> => {
      const calls = scheduler.calls.length;
      for (let i = 0; i < 100 && scheduler.calls.length === calls; i++) {
        assert.equal(replicaOf(await post(url, ECHO, session)), 'a');
        await new Promise((resolve) => setTimeout(resolve, 10));
      }
      assert.ok(scheduler.calls.length > calls, 'the scheduler was asked');
    };
    // Replica a says it forwarded, yet the scheduler still places rt-1 behind it (its view lags).
    moved = true;
    await askedAgain();
    // Another runtime would be a new placement: the session's state is on rt-1.
    scheduler.runtimes = [{ id: 'rt-2', address: addressB }];
    await askedAgain();
    moved = false;
    assert.equal(replicaOf(await post(url, ECHO, session)), 'a');
    assert.equal(gateway.stats().routesFollowed, followed);
  });
});
