// What a 503 `unschedulable` asks a client to wait: a gateway in front of
// the scheduler double, on loopback. A class no runtime serves passes only
// when a runtime of it joins, so its Retry-After is longer than that of a
// fleet whose runtimes are busy or failing (every one excluded), which free
// up within a second or so.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { Server } from 'node:http';
import { createGateway, type Gateway } from '@switchyard/gateway';
import { startSchedulerDouble, type SchedulerDouble } from './fixtures/scheduler-double.ts';
import { INITIALIZE, listen, post, stopServer } from './harness.ts';

/**
 * An address where nothing listens: port 1 on loopback. Not a port just
 * freed, which port 0 hands to the next listener of a test running beside.
 */
const DEAD_ADDRESS = 'http://127.0.0.1:1';

describe('a 503 unschedulable', () => {
  let scheduler: SchedulerDouble;
  let gateway: Gateway;
  let server: Server;
  let url: string;
  before(async () => {
    scheduler = await startSchedulerDouble([]);
    gateway = createGateway({ schedulers: [scheduler.url], upstreamMode: 'direct' });
    ({ server, url } = await listen(gateway));
  });
  after(async () => {
    await stopServer(server);
    await gateway.close();
    await scheduler.close();
  });

  const cases = [
    {
      name: 'asks for 10 s when no runtime serves the class: it passes only when one joins',
      offer: async () => [],
      retryAfter: '10',
    },
    {
      name: 'asks for 1 s when every runtime of the class was excluded: it could not be dialled just now',
      offer: async () => [{ id: 'rt-gone', address: DEAD_ADDRESS }],
      retryAfter: '1',
    },
  ];
  for (const c of cases) {
    it(c.name, async () => {
      scheduler.runtimes = await c.offer();
      const res = await post(url, INITIALIZE, { 'x-switchyard-class': 'gpu' });
      assert.equal(res.status, 503, JSON.stringify(res.json));
      const { error } = res.json as { error: { message: string; data: { reason: string } } };
      assert.equal(error.data.reason, 'unschedulable');
      assert.match(error.message, /^No runtime can serve this request: /);
      assert.equal(res.headers.get('retry-after'), c.retryAfter);
    });
  }

  // A gateway and a runtime each started with their own defaults: the gateway's class is `default`,
  // the runtime serves `demo`. A client that names no class must learn where its class came from.
  it("says a request that named no class got the gateway's default, and where a request names one", async () => {
    scheduler.runtimes = [];
    const res = await post(url, INITIALIZE);
    assert.equal(res.status, 503, JSON.stringify(res.json));
    const { error } = res.json as { error: { message: string } };
    assert.match(error.message, /no runtime serves class default/);
    assert.match(
      error.message,
      /the request named no class \(path class, header X-Switchyard-Class\), so it got the gateway's defaultClass/i,
    );
  });

  it('says nothing of the default to a request that named its class', async () => {
    scheduler.runtimes = [];
    const res = await post(url, INITIALIZE, { 'x-switchyard-class': 'default' });
    const { error } = res.json as { error: { message: string } };
    assert.match(error.message, /no runtime serves class default$/);
  });
});
