// The metering sink's queue on its own, with a writer the test answers by
// hand: which batches it sends, in which order, and what it drops. Against
// Redis, see metering-redis-away.test.ts.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ManualClock } from '@switchyard/clock/testing';
import { WriteBacklog } from '../src/metering-backlog.ts';

/** A refusal no resend changes, told apart by the backlog's `refusedForGood`. */
const REFUSED = new Error('refused for good');
const PASSING = new Error('refused for now');

function harness(lengthMax = 100, batchMax = 3) {
  const clock = new ManualClock();
  const sent: string[][] = [];
  const answers: ((error?: Error) => void)[] = [];
  const dropped: number[] = [];
  const refused: unknown[] = [];
  let ready = true;
  const backlog = new WriteBacklog<string>({
    lengthMax,
    batchMax,
    canSend: () => ready,
    send: (batch) =>
      new Promise<void>((resolve, reject) => {
        sent.push([...batch]);
        answers.push((error) => (error ? reject(error) : resolve()));
      }),
    refusedForGood: (error) => error === REFUSED,
    onDropped: (n) => dropped.push(n),
    onRefused: (error) => refused.push(error),
    onDeferred: () => {},
    retryPauseMs: 1_000,
    clock,
  });
  /** Answers the write in flight and lets the backlog act on it. */
  const answer = async (error?: Error): Promise<void> => {
    answers.shift()!(error);
    await new Promise((r) => setImmediate(r));
  };
  return {
    backlog,
    clock,
    sent,
    dropped,
    refused,
    answer,
    setReady: (r: boolean) => (ready = r),
  };
}

describe('metering write backlog', () => {
  it('sends one batch at a time, in order, the next once the last is written', async () => {
    const h = harness();
    for (const item of ['a', 'b', 'c', 'd', 'e']) h.backlog.push(item);
    assert.deepEqual(h.sent, [['a']], 'the first goes at once, the rest wait for it');
    await h.answer();
    assert.deepEqual(h.sent, [['a'], ['b', 'c', 'd']]);
    await h.answer();
    assert.deepEqual(h.sent.at(-1), ['e']);
    await h.answer();
    assert.equal(h.backlog.size, 0);
  });

  it('holds everything while it may not send, and sends it at the next wake', async () => {
    const h = harness();
    h.setReady(false);
    for (const item of ['a', 'b']) h.backlog.push(item);
    assert.deepEqual(h.sent, []);
    h.setReady(true);
    h.backlog.wake();
    assert.deepEqual(h.sent, [['a', 'b']]);
  });

  it('sends a batch that failed for now again, first, after the pause or at a wake', async () => {
    const h = harness();
    h.backlog.push('a');
    h.backlog.push('b');
    await h.answer(PASSING);
    h.backlog.push('c');
    assert.deepEqual(h.sent, [['a']], 'nothing is sent during the pause');
    await h.clock.advance(1_000);
    assert.deepEqual(h.sent.at(-1), ['a', 'b', 'c']);
    await h.answer(PASSING);
    h.backlog.wake();
    assert.deepEqual(h.sent.at(-1), ['a', 'b', 'c'], 'a new connection ends the pause');
    await h.answer();
    assert.equal(h.backlog.size, 0);
    assert.deepEqual(h.refused, []);
  });

  it('drops a batch refused for good, once per item, and goes on with what follows', async () => {
    const h = harness();
    h.backlog.push('x');
    for (const item of ['a', 'b', 'c', 'd']) h.backlog.push(item);
    await h.answer();
    assert.deepEqual(h.sent.at(-1), ['a', 'b', 'c']);
    await h.answer(REFUSED);
    assert.deepEqual(h.refused, [REFUSED, REFUSED, REFUSED]);
    assert.deepEqual(h.sent.at(-1), ['d'], 'no pause: the next batch goes at once');
    await h.answer();
    assert.equal(h.backlog.size, 0);
  });

  it('drops the oldest waiting past lengthMax, counting them, and never the batch in flight', async () => {
    const h = harness(2);
    for (const item of ['a', 'b', 'c', 'd', 'e']) h.backlog.push(item);
    assert.deepEqual(h.dropped, [1, 2]);
    assert.equal(h.backlog.size, 3, 'a in flight, d and e waiting');
    // A failed batch goes back to the head of a queue that is full: the oldest go.
    await h.answer(PASSING);
    assert.deepEqual(h.dropped, [1, 2, 3]);
    h.backlog.wake();
    assert.deepEqual(h.sent.at(-1), ['d', 'e']);
  });

  it('tells when nothing is left, and sends nothing once stopped', async () => {
    const h = harness();
    let drained = false;
    h.backlog.push('a');
    void h.backlog.drained().then(() => (drained = true));
    await h.answer();
    assert.ok(drained);
    h.backlog.stop();
    h.backlog.push('b');
    assert.equal(h.sent.length, 1);
  });
});
