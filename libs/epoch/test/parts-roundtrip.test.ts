// Whatever the state and the part size, the frames a run is cut into stay within the size, and put together
// they make the message again: runtimes cut across parts, processes and threads in their order.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { parseWith, syncFrameSchema } from '@switchyard/protocol';
import type { RuntimeState, SyncFrame, SyncMessage } from '@switchyard/protocol';
import { PartsAssembler } from '../src/parts-assembler.ts';
import { partFrames } from '../src/parts-writer.ts';

const id = fc.stringMatching(/^[A-Za-z0-9._:@-]{1,128}$/);

const runtimeStates: fc.Arbitrary<RuntimeState[]> = fc
  .uniqueArray(
    fc.record(
      {
        id,
        // Any characters: a runtime's fields are counted encoded, in UTF-8.
        metadata: fc.dictionary(fc.stringMatching(/^[a-z]{1,8}$/), fc.string({ maxLength: 64, unit: 'binary' }), {
          maxKeys: 3,
          noNullPrototype: true,
        }),
        processes: fc.array(id, { maxLength: 80, size: 'max' }),
        threads: fc.array(fc.record({ process: id, thread: id }, { noNullPrototype: true }), {
          maxLength: 80,
          size: 'max',
        }),
      },
      { noNullPrototype: true },
    ),
    { selector: (r) => r.id, maxLength: 6, size: 'max' },
  )
  .map((list) =>
    list.map(({ id, metadata, processes, threads }) => ({
      runtime: {
        ...{ id, classes: ['default'], metadata, version: '1.0.0', idleWeight: { sandboxes: 4 } },
        ...{ available: true, owner: 's1', generation: 1 },
      },
      processes,
      threads,
    })),
  );

const messages: fc.Arbitrary<SyncMessage> = fc.oneof(
  runtimeStates.map((runtimes) => ({
    type: 'commit' as const,
    ...{ term: 3, epoch: 41 },
    body: { kind: 'snapshot' as const, snapshot: { epoch: 41, term: 3, runtimes } },
  })),
  fc.tuple(runtimeStates, id).map(([runtimes, replica]) => ({
    type: 'collect' as const,
    ...{ term: 3, epoch: 41, replica, version: 7 },
    part: { kind: 'full' as const, runtimes },
  })),
);

describe('a run of parts', () => {
  it('stays within the part size, frame by frame, and makes the message again', () => {
    fc.assert(
      fc.property(messages, fc.integer({ min: 2048, max: 16_384 }), (msg, partBytes) => {
        const frames = partFrames(msg, partBytes);
        if (!frames) {
          assert.ok(Buffer.byteLength(JSON.stringify(msg)) <= partBytes, 'a message that goes whole fits a part');
          return;
        }
        assert.ok(frames.length >= 3, 'two parts at least, and the end');
        // A run of exactly runBytesMax is taken.
        const partsBytes = frames.slice(0, -1).reduce((sum, text) => sum + Buffer.byteLength(text), 0);
        const assembler = new PartsAssembler(partsBytes);
        let made: SyncMessage | undefined;
        for (const text of frames) {
          assert.ok(Buffer.byteLength(text) <= partBytes, `a frame of ${Buffer.byteLength(text)} bytes`);
          const parsed = parseWith(syncFrameSchema, JSON.parse(text));
          assert.ok(parsed.ok, parsed.ok ? '' : parsed.error);
          const frame: SyncFrame = parsed.value;
          if (frame.type === 'part') assert.equal(assembler.add(frame, Buffer.byteLength(text)), undefined);
          else if (frame.type === 'commit-end' || frame.type === 'collect-end') {
            const run = assembler.finish(frame);
            assert.ok(run.ok, run.ok ? '' : run.error);
            made = run.msg;
          } else assert.fail(`a ${frame.type} in a run`);
        }
        assert.deepEqual(made, msg);
      }),
      { numRuns: 200 },
    );
  });

  it('of a delta, an announce or a part of ops is none: they go whole', () => {
    const ops: SyncMessage[] = [
      { type: 'commit', term: 1, epoch: 2, body: { kind: 'delta', baseEpoch: 1, ops: [] } },
      { type: 'announce', term: 1, epoch: 2 },
      { type: 'collect', term: 1, epoch: 2, replica: 's1', version: 2, part: { kind: 'delta', base: 1, ops: [] } },
    ];
    for (const msg of ops) assert.equal(partFrames(msg, 1), undefined, msg.type);
  });
});
