// The leader reported the size of a term's first commit by encoding the whole snapshot as one string: past
// V8's largest string (about 512 M characters) that threw, and below it the whole state was held as one
// string, which runs of parts are there to avoid. The size is now counted runtime by runtime.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { RuntimeState, SyncMessage } from '@switchyard/protocol';
import { messageBytes } from '../src/encode.ts';
import { runtimeState, startCluster } from './support/cluster.ts';

const snapshotCommit = (runtimes: RuntimeState[], term = 3, epoch = 7): SyncMessage => ({
  type: 'commit',
  term,
  epoch,
  body: { kind: 'snapshot', snapshot: { epoch, term, runtimes } },
});

/** Whether `value` is a snapshot commit with its runtimes (its envelope alone is small whatever the state). */
const isWholeSnapshot = (value: unknown): boolean => {
  const msg = value as Partial<Extract<SyncMessage, { type: 'commit' }>> | undefined;
  return msg?.type === 'commit' && msg.body?.kind === 'snapshot' && msg.body.snapshot.runtimes.length > 0;
};

/** Runs `fn` with a JSON.stringify that refuses a whole snapshot commit, as V8 does one past its largest string. */
async function refusingWholeSnapshots(fn: () => Promise<void>): Promise<void> {
  const stringify = JSON.stringify;
  JSON.stringify = ((value: unknown, ...rest: []) => {
    if (isWholeSnapshot(value)) throw new RangeError('Invalid string length');
    return stringify(value, ...rest);
  }) as typeof JSON.stringify;
  try {
    await fn();
  } finally {
    JSON.stringify = stringify;
  }
}

describe("the size of a term's first commit", () => {
  it('is the UTF-8 size of the snapshot commit, as its encoding as one string says', () => {
    const plain = runtimeState('r-2', 'owner', ['p/t']);
    const unicode = { ...plain, runtime: { ...plain.runtime, metadata: { note: 'snow ☃ and "quotes"' } } };
    for (const runtimes of [[], [runtimeState('r1', 'a', ['p1/t1'])], [unicode, plain]]) {
      const msg = snapshotCommit(runtimes);
      assert.equal(messageBytes(msg), Buffer.byteLength(JSON.stringify(msg)), `${runtimes.length} runtimes`);
    }
  });

  it('is reported without encoding the whole snapshot as one string', async () => {
    const sizes: number[] = [];
    const leaderPart = [runtimeState('leader-r1', 'leader', ['p1/t1']), runtimeState('leader-r2', 'leader', ['p2/t1'])];
    const cluster = startCluster([], { onCommit: (info) => sizes.push(info.bytes), localPart: () => leaderPart });
    try {
      await refusingWholeSnapshots(() => cluster.clock.advance(20));
    } finally {
      cluster.stop();
    }
    const want = snapshotCommit([...cluster.leader.latestStates()!], 1, 1);
    assert.equal(cluster.leader.latestStates()!.length, 2);
    assert.deepEqual(sizes, [Buffer.byteLength(JSON.stringify(want))]);
  });
});
