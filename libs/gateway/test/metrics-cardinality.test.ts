// Every label of the gateway's metrics takes a bounded set of values, so
// that nobody outside can grow the series a scrape returns (and the
// gateway's memory) without end. A status code comes from upstream: a
// runtime may answer any three digits, and the gateway relays them.
import { once } from 'node:events';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { Registry } from 'prom-client';
import { createGateway } from '@switchyard/gateway';
import type { Gateway } from '@switchyard/gateway';
import { startSchedulerDouble } from './fixtures/scheduler-double.ts';
import type { SchedulerDouble } from './fixtures/scheduler-double.ts';
import { INITIALIZE, listen, post, stopServer } from './harness.ts';
import type { Server } from 'node:http';

/** Distinct statuses the runtime answers with, none of them a registered HTTP status. */
const CODES = Array.from({ length: 300 }, (_, i) => 600 + i);
/** At most this many request series: four method values (GET, POST, DELETE, OTHER) times the known statuses and one more. */
const SERIES_MAX = 256;

describe('the request counter of a gateway whose runtime answers made-up statuses', () => {
  const registry = new Registry();
  let runtime: Server;
  let scheduler: SchedulerDouble;
  let gateway: Gateway;
  let server: Server;
  let url: string;
  before(async () => {
    let next = 0;
    runtime = createServer((req, res) => {
      req.resume();
      res.writeHead(CODES[next++ % CODES.length]!, { 'content-type': 'application/json' }).end('{}');
    });
    runtime.listen(0, '127.0.0.1');
    await once(runtime, 'listening');
    const address = `http://127.0.0.1:${(runtime.address() as AddressInfo).port}`;
    scheduler = await startSchedulerDouble([{ id: 'rt-codes', address }]);
    gateway = createGateway({
      schedulers: [scheduler.url],
      upstreamMode: 'direct',
      metrics: { registry, prefix: 'switchyard_gateway_' },
    });
    ({ server, url } = await listen(gateway));
  });
  after(async () => {
    await stopServer(server);
    await gateway.close();
    runtime.closeAllConnections();
    runtime.close();
    await scheduler.close();
  });

  it(`keeps ${CODES.length} distinct upstream statuses to a bounded set of series, counting every request`, async () => {
    for (const code of CODES) assert.equal((await post(url, INITIALIZE)).status, code);
    const text = (await registry.getSingleMetricAsString('switchyard_gateway_requests_total')) ?? '';
    const series = text.split('\n').filter((line) => line.startsWith('switchyard_gateway_requests_total{'));
    assert.ok(series.length <= SERIES_MAX, `${series.length} series`);
    assert.ok(series.length < CODES.length, `${series.length} series for ${CODES.length} statuses`);
    const counted = series.reduce((sum, line) => sum + Number(line.split(' ').at(-1)), 0);
    assert.equal(counted, CODES.length, 'every request counted');
    assert.match(text, /\{method="POST",code="other"\} 300$/m, text.slice(0, 500));
  });
});
