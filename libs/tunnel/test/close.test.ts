// A runtime closing its tunnel (it is stopping) sends GOAWAY: the scheduler
// opens no new stream on it, and the requests in flight finish, both ends
// waiting for them up to the runtime's grace rather than the 1 s a tunnel
// closed for other reasons gets.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type http2 from 'node:http2';
import type { CarrierTransport } from '../src/index.ts';
import { httpRequest, startRuntime, startScheduler } from './helpers.ts';
import type { Scheduler } from './helpers.ts';

/** Answers `/slow/<ms>` after that many milliseconds. */
function slow(req: http2.Http2ServerRequest, res: http2.Http2ServerResponse): void {
  const ms = Number(/^\/slow\/(\d+)$/.exec(req.url)?.[1] ?? 0);
  const timer = setTimeout(() => res.end(`done after ${ms}`), ms);
  res.on('close', () => clearTimeout(timer));
}

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

describe('a runtime closing its tunnel', () => {
  let scheduler: Scheduler;
  before(async () => {
    scheduler = await startScheduler();
  });
  after(() => scheduler.close());

  const transports: CarrierTransport[] = ['http2', 'websocket'];
  for (const transport of transports) {
    it(`lets a request in flight finish past the usual 1 s, then resolves once the tunnel is gone (${transport})`, async () => {
      const id = `rt-grace-${transport}`;
      const { dialer } = await startRuntime(scheduler, id, slow, { transport });
      const answer = httpRequest(`${scheduler.url}/proxy/${id}/slow/1800`);
      await sleep(200);
      const started = performance.now();
      const closed = dialer.close(10_000);
      await sleep(100);
      const refused = await httpRequest(`${scheduler.url}/proxy/${id}/slow/0`);
      assert.notEqual(refused.status, 200, 'no new request reaches a runtime that sent GOAWAY');
      const { status, body } = await answer;
      assert.equal(status, 200);
      assert.equal(body, 'done after 1800');
      await closed;
      const elapsedMs = performance.now() - started;
      assert.ok(elapsedMs < 3000, `the tunnel went ${elapsedMs} ms after close(), once its last stream ended`);
    });

    it(`cuts what is still in flight at the end of the grace (${transport})`, async () => {
      const id = `rt-cut-${transport}`;
      const { dialer } = await startRuntime(scheduler, id, slow, { transport });
      const answer = httpRequest(`${scheduler.url}/proxy/${id}/slow/20000`).then(
        (r) => r.status,
        () => 'reset',
      );
      await sleep(200);
      const started = performance.now();
      await dialer.close(400);
      const elapsedMs = performance.now() - started;
      assert.ok(elapsedMs >= 390 && elapsedMs < 2000, `the tunnel went ${elapsedMs} ms after close(400)`);
      assert.notEqual(await answer, 200);
    });
  }
});
