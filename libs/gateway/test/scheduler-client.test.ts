// How the gateway picks which scheduler replica to ask: real HTTP servers
// stand for replicas (a live one places, a failing one answers 503, a
// frozen one never answers); the clock is manual, so the periods a replica
// is asked last are stepped through exactly.
import { createServer } from 'node:http';
import type { Server, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { Agent } from 'undici';
import { ManualClock, flushMicrotasks } from '@switchyard/clock/testing';
import { SCHEDULE_HEDGE_MS, SchedulerClient } from '../src/scheduler-client.ts';
import { ThrottledLog } from '../src/throttled-log.ts';
import { startSchedulerDouble, type SchedulerDouble } from './fixtures/scheduler-double.ts';
import { until } from './until.ts';

const quiet = (): void => {};
const silent = { info: quiet, warn: quiet, error: quiet, debug: quiet };
const REQUEST = { class: 'demo', processId: 'p1', threadId: 't1' };

/** A replica that counts the asks it gets and answers each with `answer` (or never, when it returns false). */
async function replica(answer: (res: ServerResponse) => boolean | void) {
  let asked = 0;
  const server: Server = createServer((req, res) => {
    asked++;
    req.resume();
    req.on('end', () => void answer(res));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    get asked() {
      return asked;
    },
    async close() {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

const notReady = (res: ServerResponse): void => {
  res.writeHead(503, { 'content-type': 'application/json' }).end('{"code":"not_ready"}');
};

describe('scheduler client: which replica is asked', () => {
  let live: SchedulerDouble;
  const agent = new Agent();
  before(async () => (live = await startSchedulerDouble([{ id: 'rt', address: 'http://127.0.0.1:9' }])));
  after(async () => {
    await live.close();
    await agent.close();
  });

  const clientOf = (schedulers: string[], clock: ManualClock, hedges = { count: 0 }) =>
    new SchedulerClient({
      schedulers,
      dispatcher: agent,
      upstreamLog: new ThrottledLog(silent, clock),
      clock,
      timeoutMs: 5000,
      onHedge: () => hedges.count++,
    });

  it('asks a failing replica last, for a period that doubles while it keeps failing', async () => {
    const failing = await replica(notReady);
    const clock = new ManualClock();
    const client = clientOf([failing.url, live.url], clock);
    try {
      const askedAfter = async (advanceMs: number): Promise<number> => {
        await clock.advance(advanceMs);
        // Two calls: one of them starts at the failing replica whenever it is in good standing.
        for (let i = 0; i < 2; i++) assert.equal((await client.schedule(REQUEST)).runtime, 'rt');
        return failing.asked;
      };
      assert.equal(await askedAfter(0), 1, 'asked once, then last for 1 s');
      assert.equal(await askedAfter(999), 1);
      assert.equal(await askedAfter(1), 2, 'asked again after 1 s, then last for 2 s');
      assert.equal(await askedAfter(1999), 2);
      assert.equal(await askedAfter(1), 3, 'asked again after 2 s, then last for 4 s');
      assert.equal(await askedAfter(3999), 3);
    } finally {
      await failing.close();
    }
  });

  it('counts a burst of overlapping failures as one', async () => {
    const failing = await replica(notReady);
    const clock = new ManualClock();
    const client = clientOf([failing.url, live.url], clock);
    try {
      await Promise.all(Array.from({ length: 6 }, () => client.schedule(REQUEST)));
      assert.equal(failing.asked, 3, 'the three calls starting there asked it at once');
      await clock.advance(1000);
      for (let i = 0; i < 2; i++) await client.schedule(REQUEST);
      assert.equal(failing.asked, 4, 'asked last for 1 s, as after one failure');
    } finally {
      await failing.close();
    }
  });

  it('asks the next replica too when one goes unanswered, and a replica that answers is in good standing again', async () => {
    let frozen = true;
    const answers: Array<() => void> = [];
    const flaky = await replica((res) => {
      // Frozen: the ask is held; thawed: it is answered like the live replica would.
      const forward = (): void =>
        void fetch(`${live.url}/api/schedule`, { method: 'POST', body: JSON.stringify(REQUEST) }).then(async (a) =>
          res.writeHead(a.status, { 'content-type': 'application/json' }).end(await a.text()),
        );
      if (frozen) answers.push(forward);
      else forward();
    });
    const clock = new ManualClock();
    const hedges = { count: 0 };
    const client = clientOf([flaky.url, live.url], clock, hedges);
    try {
      const placed = client.schedule(REQUEST);
      await until(() => flaky.asked === 1);
      await clock.advance(SCHEDULE_HEDGE_MS);
      assert.equal((await placed).runtime, 'rt');
      assert.equal(hedges.count, 1);
      for (let i = 0; i < 2; i++) await client.schedule(REQUEST);
      assert.equal(flaky.asked, 1, 'the replica that lagged is asked last');

      frozen = false;
      for (const answer of answers) answer();
      await clock.advance(1000);
      for (let i = 0; i < 4; i++) await client.schedule(REQUEST);
      assert.equal(flaky.asked, 3, 'it answered, so it is asked in turn again (two of four calls start there)');
      assert.equal(hedges.count, 1);
    } finally {
      await flaky.close();
    }
  });

  it('holds nothing against a replica when the caller left before it answered', async () => {
    const frozen = await replica(() => false);
    const clock = new ManualClock();
    const client = clientOf([frozen.url, live.url], clock);
    try {
      const left = new AbortController();
      const placing = client.schedule(REQUEST, left.signal);
      await until(() => frozen.asked === 1);
      left.abort(new Error('client went away'));
      await assert.rejects(placing, /client went away/);
      await client.schedule(REQUEST); // starts at the live replica
      const third = client.schedule(REQUEST); // starts at the frozen one: still in good standing
      await until(() => frozen.asked === 2);
      await clock.advance(SCHEDULE_HEDGE_MS);
      assert.equal((await third).runtime, 'rt');
    } finally {
      await frozen.close();
    }
  });

  it('hedges within a budget when every replica is slow: ten at once, then one call in ten', async () => {
    const held: Array<() => void> = [];
    /** Holds every ask until released, then answers it as the live replica does. */
    const slow = () =>
      replica((res) => {
        held.push(
          () =>
            void fetch(`${live.url}/api/schedule`, { method: 'POST', body: JSON.stringify(REQUEST) }).then(async (a) =>
              res.writeHead(a.status, { 'content-type': 'application/json' }).end(await a.text()),
            ),
        );
      });
    const [a, b] = [await slow(), await slow()];
    const clock = new ManualClock();
    const hedges = { count: 0 };
    const client = clientOf([a.url, b.url], clock, hedges);
    try {
      const placing = Array.from({ length: 30 }, () => client.schedule(REQUEST));
      await until(() => a.asked + b.asked === 30);
      await clock.advance(SCHEDULE_HEDGE_MS);
      await until(() => a.asked + b.asked === 40);
      assert.equal(hedges.count, 10, 'the burst: ten of the thirty calls hedged');
      for (const release of held.splice(0)) release();
      await Promise.all(placing);
      assert.equal(hedges.count, 10);
    } finally {
      await a.close();
      await b.close();
    }
  });

  it('asks a single URL (a Service) twice a round, on two connections', async () => {
    const service = await replica(notReady);
    const clock = new ManualClock();
    const client = clientOf([service.url], clock);
    try {
      const failed = client.schedule(REQUEST).catch((error: unknown) => error);
      // Four rounds with backoff between them (20, 40, 80 ms).
      for (let i = 0; i < 10 && service.asked < 8; i++) {
        await flushMicrotasks();
        await new Promise((resolve) => setTimeout(resolve, 20));
        await clock.advance(100);
      }
      assert.match(String(await failed), /No scheduler replica answered/);
      assert.equal(service.asked, 8);
    } finally {
      await service.close();
    }
  });
});
