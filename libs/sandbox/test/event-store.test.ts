import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { JSONRPCMessage } from '@modelcontextprotocol/server';
import { SessionEventStore } from '../src/event-store.ts';

const msg = (n: number): JSONRPCMessage => ({ jsonrpc: '2.0', method: 'notifications/message', params: { n } });

async function replay(store: SessionEventStore, after: string): Promise<{ stream: string; ns: unknown[] }> {
  const ns: unknown[] = [];
  const stream = await store.replayEventsAfter(after, {
    send: async (_id, m) => void ns.push((m as unknown as { params: { n: number } }).params.n),
  });
  return { stream, ns };
}

describe('session event store', () => {
  const cases = [
    { name: 'replays the events of the same stream after the given id', max: 10, resumeAt: 0, want: [2, 4] },
    { name: 'replays nothing after the newest event', max: 10, resumeAt: 4, want: [] },
    { name: 'replays nothing from an id already evicted, but still names its stream', max: 2, resumeAt: 0, want: [] },
  ];
  for (const c of cases) {
    it(c.name, async () => {
      const store = new SessionEventStore(c.max, 1024 * 1024);
      const ids: string[] = [];
      // Streams alternate: a b a b a → events 0, 2, 4 on stream a.
      for (let n = 0; n < 5; n++) ids.push(await store.storeEvent(n % 2 === 0 ? 'a' : 'b', msg(n)));
      const { stream, ns } = await replay(store, ids[c.resumeAt]!);
      assert.equal(stream, 'a');
      assert.deepEqual(ns, c.want);
    });
  }

  it('keeps at most eventsMax events', async () => {
    const store = new SessionEventStore(3, 1024 * 1024);
    const ids: string[] = [];
    for (let n = 0; n < 10; n++) ids.push(await store.storeEvent('s', msg(n)));
    assert.deepEqual((await replay(store, ids[7]!)).ns, [8, 9]);
    assert.deepEqual((await replay(store, ids[6]!)).ns, []);
  });

  it('keeps at most bytesMax bytes of events, however few they are', async () => {
    const big = (n: number): JSONRPCMessage => ({
      jsonrpc: '2.0',
      method: 'notifications/message',
      params: { n, data: 'x'.repeat(3000) },
    });
    const store = new SessionEventStore(1000, 10_000);
    const ids: string[] = [];
    for (let n = 0; n < 5; n++) ids.push(await store.storeEvent('s', big(n)));
    // A little over 3,000 bytes each: the newest three fit in 10,000.
    assert.deepEqual((await replay(store, ids[2]!)).ns, [3, 4]);
    assert.deepEqual((await replay(store, ids[1]!)).ns, []);
  });

  it('keeps no event bigger than bytesMax: a resume from before it replays nothing, not a stream with a gap', async () => {
    const store = new SessionEventStore(1000, 10_000);
    const first = await store.storeEvent('s', msg(0));
    const huge = { jsonrpc: '2.0', method: 'notifications/message', params: { n: 1, data: 'x'.repeat(20_000) } };
    await store.storeEvent('s', huge as JSONRPCMessage);
    const third = await store.storeEvent('s', msg(2));
    assert.deepEqual((await replay(store, first)).ns, []);
    await store.storeEvent('s', msg(3));
    assert.deepEqual((await replay(store, third)).ns, [3]);
  });
});
