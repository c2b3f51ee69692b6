// Every label of the gateway's metrics takes a bounded set of values, so
// that nobody outside can grow the series a scrape returns (and the
// gateway's memory) without end. A status code comes from upstream: a
// runtime may answer any three digits, and the gateway relays them.
//
// The gateway also asks a runtime it holds connections to `GET /healthz`
// every check interval (UpstreamChecks): a run slower than that (a loaded
// machine) meets one. The stand-in answers it apart, and the test makes one
// happen mid-run on purpose, so that only the requests the test sent take
// the made-up statuses, on a quiet machine or a busy one.
import { EventEmitter, once } from 'node:events';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { Registry } from 'prom-client';
import { ManualClock, within } from '@switchyard/clock/testing';
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
/** The gateway's check interval, on the test's clock. */
const CHECK_MS = 5_000;
/** The request the stand-in holds while the gateway checks it (1-based). */
const HELD = CODES.length / 2;

describe('the request counter of a gateway whose runtime answers made-up statuses', () => {
  const registry = new Registry();
  let runtime: Server;
  let scheduler: SchedulerDouble;
  let gateway: Gateway;
  let server: Server;
  let url: string;
  const clock = new ManualClock();
  /** `held` (with the answer to send) when request HELD is in; `check` on each liveness check. */
  const seen = new EventEmitter();
  let received = 0;
  before(async () => {
    runtime = createServer((req, res) => {
      req.resume();
      // The gateway's own liveness check, not a request the test sent: answered, not counted.
      if (req.method === 'GET' && req.url === '/healthz') {
        res.writeHead(204).end();
        return void seen.emit('check');
      }
      const status = CODES[received++ % CODES.length]!;
      const answer = (): void => void res.writeHead(status, { 'content-type': 'application/json' }).end('{}');
      if (received === HELD) seen.emit('held', answer);
      else answer();
    });
    runtime.listen(0, '127.0.0.1');
    await once(runtime, 'listening');
    const address = `http://127.0.0.1:${(runtime.address() as AddressInfo).port}`;
    scheduler = await startSchedulerDouble([{ id: 'rt-codes', address }]);
    gateway = createGateway({
      schedulers: [scheduler.url],
      upstreamMode: 'direct',
      clock,
      upstreamCheckIntervalMs: CHECK_MS,
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
    for (const [i, code] of CODES.entries()) {
      const sent = post(url, INITIALIZE);
      if (i + 1 === HELD) {
        // With a request in flight the gateway holds a connection to the runtime, so its next tick checks it.
        const [answer] = (await within(once(seen, 'held'), 30_000, 'request held at the runtime')) as [() => void];
        const checked = once(seen, 'check');
        await clock.advance(CHECK_MS);
        await within(checked, 30_000, 'the gateway checked the runtime it holds a connection to');
        answer();
      }
      assert.equal((await sent).status, code);
    }
    assert.equal(received, CODES.length, 'the runtime got each request the test sent, once');
    const text = (await registry.getSingleMetricAsString('switchyard_gateway_requests_total')) ?? '';
    const series = text.split('\n').filter((line) => line.startsWith('switchyard_gateway_requests_total{'));
    assert.ok(series.length <= SERIES_MAX, `${series.length} series`);
    assert.ok(series.length < CODES.length, `${series.length} series for ${CODES.length} statuses`);
    const counted = series.reduce((sum, line) => sum + Number(line.split(' ').at(-1)), 0);
    assert.equal(counted, CODES.length, 'every request counted');
    assert.match(text, /\{method="POST",code="other"\} 300$/m, text.slice(0, 500));
  });
});
