// The list of standing event streams a draining gateway ends: what it ends,
// and what listing costs. A gateway lists every open GET stream it relays,
// 10,000 in the benchmark, for a list read once, on SIGTERM.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import v8 from 'node:v8';
import { StandingStreams, unlist } from '../src/standing-streams.ts';
import type { StandingStream } from '../src/standing-streams.ts';

/** A relay as the list sees one: it counts how often it was ended. */
class Stream implements StandingStream {
  older: StandingStream | undefined = undefined;
  newer: StandingStream | undefined = undefined;
  ended = 0;
  endStream(): void {
    this.ended++;
  }
}

const streams = (n: number): Stream[] => Array.from({ length: n }, () => new Stream());

describe('StandingStreams', () => {
  it('ends every stream listed, once, and none taken off before', () => {
    const list = new StandingStreams();
    const [a, b, c, d] = streams(4) as [Stream, Stream, Stream, Stream];
    for (const s of [a, b, c, d]) list.add(s);
    // The oldest, one in the middle: their relays ended before the gateway drained.
    unlist(a);
    unlist(c);
    unlist(c);
    list.endAll();
    assert.deepEqual(
      [a, b, c, d].map((s) => s.ended),
      [0, 1, 0, 1],
    );
    list.endAll();
    assert.deepEqual(
      [a, b, c, d].map((s) => s.ended),
      [0, 1, 0, 1],
      'ended streams are off the list',
    );
  });

  it('ends a stream added after endAll at once, without listing it', () => {
    const list = new StandingStreams();
    list.endAll();
    const late = new Stream();
    list.add(late);
    assert.equal(late.ended, 1);
    assert.equal(late.older, undefined);
  });

  it('goes on to the end when ending a stream takes another off', () => {
    const list = new StandingStreams();
    const all = streams(3);
    // Ending the first also ends the second's relay, as an upstream connection's loss would.
    all[0]!.endStream = () => unlist(all[1]!);
    for (const s of all) list.add(s);
    list.endAll();
    assert.deepEqual(
      all.map((s) => s.ended),
      [0, 0, 1],
    );
  });

  it('takes no memory of its own per stream listed', () => {
    const n = 5000;
    /** V8 heap bytes in use after a full collection (queryObjects makes one). */
    const heapInUse = (): number => {
      v8.queryObjects(Stream, { format: 'count' });
      return v8.getHeapStatistics().used_heap_size;
    };
    /** Heap bytes that listing `all` took, the streams themselves made before. */
    const listing = (all: readonly Stream[]): number => {
      const list = new StandingStreams();
      const before = heapInUse();
      for (const s of all) list.add(s);
      const added = heapInUse() - before;
      list.endAll();
      assert.ok(all.every((s) => s.ended === 1));
      return added;
    };
    // V8 may compile `add` while a round runs, and its code counts in the heap (some 170 KB, seen in about one
    // run in six): the fewest bytes of three rounds is what listing takes. A Set of them and a WeakMap to them,
    // as before, took 300 KB for these 5,000 in every round.
    const added = Math.min(...[0, 1, 2].map(() => listing(streams(n))));
    assert.ok(added < n * 4, `${added} bytes to list ${n} streams`);
  });
});
