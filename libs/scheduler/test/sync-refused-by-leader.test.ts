// A leader that refused a follower's run of parts (above epoch.runBytesMax, or out of order) or a frame above
// epoch.frameBytesMax closed the connection and logged nothing: only the follower said why, and the leader's
// operator saw a replica that never reported. A real leader on loopback; raw sync peers send what it refuses.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { WebSocket } from 'ws';
import { MemoryLeaseStore } from '@switchyard/election';
import { SYNC_FEATURES, SYNC_FEATURES_HEADER } from '@switchyard/protocol';
import type { SchedulerReplica } from '@switchyard/scheduler';
import { TOKEN, recordingLogger, startReplicas, until, type LoggedLine } from './support.ts';

const FRAME_BYTES_MAX = 4096;
const RUN_BYTES_MAX = 1024;

/** A part of a follower's run: `part`, one runtime with `threads` sessions (some 40 bytes each). */
function partFrame(part: number, threads: number): string {
  const runtime = {
    id: `rt-${part}`,
    classes: ['demo'],
    metadata: {},
    version: '1.0.0',
    idleWeight: { sandboxes: 1 },
    available: true,
    owner: 'f-raw',
    generation: 1,
  };
  const sessions = Array.from({ length: threads }, (_, i) => ({ process: 'p1', thread: `t-${i}` }));
  return JSON.stringify({
    type: 'part',
    term: 1,
    epoch: 1,
    part,
    runtimes: [{ runtime, processes: ['p1'], threads: sessions }],
  });
}

describe("a follower's sync frames the leader refuses", () => {
  const lines: LoggedLine[] = [];
  let leader: SchedulerReplica | undefined;

  before(async () => {
    const epoch = { cycleIntervalMs: 200, frameBytesMax: FRAME_BYTES_MAX, runBytesMax: RUN_BYTES_MAX };
    [leader] = await startReplicas(1, new MemoryLeaseStore(), recordingLogger('s0', lines), { epoch });
    await until('s0 leads', () => leader!.isLeader || undefined);
  });
  after(async () => {
    await leader?.close();
  });

  /** Sends `frames` as follower `replica` of this release; resolves with how the leader closed the connection. */
  async function refusedWith(frames: string[], replica = 'f-raw'): Promise<{ code: number; reason: string }> {
    const ws = new WebSocket(`ws://127.0.0.1:${leader!.port}/api/sync/${replica}`, {
      perMessageDeflate: false,
      headers: { authorization: `Bearer ${TOKEN}`, [SYNC_FEATURES_HEADER]: SYNC_FEATURES.parts },
    });
    ws.on('error', () => {});
    const closed = new Promise<{ code: number; reason: string }>((resolve) =>
      ws.once('close', (code, reason) => resolve({ code, reason: reason.toString() })),
    );
    await new Promise((resolve, reject) => ws.once('open', resolve).once('error', reject));
    for (const frame of frames) ws.send(frame);
    return closed;
  }

  const leaderSaid = (level: string, pattern: RegExp): LoggedLine[] =>
    lines.filter((l) => l.level === level && pattern.test(l.msg));

  it('a run above epoch.runBytesMax is an error naming the follower and the limit, once a minute', async () => {
    for (let i = 0; i < 3; i++) {
      const { code, reason } = await refusedWith([partFrame(0, 20), partFrame(1, 20)]);
      assert.equal(code, 1008);
      assert.match(reason, /above runBytesMax/);
    }
    const said = await until('the leader says it refused the run', () =>
      leaderSaid('error', /epoch\.runBytesMax/).length > 0 ? leaderSaid('error', /epoch\.runBytesMax/) : undefined,
    );
    assert.equal(said.length, 1, 'throttled');
    assert.equal(said[0]!.fields.replica, 'f-raw');
    assert.equal(said[0]!.fields.runBytesMax, RUN_BYTES_MAX);
  });

  it('a frame above epoch.frameBytesMax is an error naming the follower and the limit, once a minute', async () => {
    for (let i = 0; i < 3; i++) {
      const { code } = await refusedWith([partFrame(0, 200)]);
      assert.notEqual(code, 1000);
    }
    const said = await until('the leader says it refused the frame', () =>
      leaderSaid('error', /follower.*epoch\.frameBytesMax/).length > 0
        ? leaderSaid('error', /follower.*epoch\.frameBytesMax/)
        : undefined,
    );
    assert.equal(said.length, 1, 'throttled');
    assert.equal(said[0]!.fields.replica, 'f-raw');
    assert.equal(said[0]!.fields.frameBytesMax, FRAME_BYTES_MAX);
  });

  it('a run out of order is a warning naming the follower and the fault, once a minute', async () => {
    for (let i = 0; i < 3; i++) {
      const { code, reason } = await refusedWith([partFrame(1, 1)]);
      assert.equal(code, 1008);
      assert.match(reason, /part 1 where part 0 was due/);
    }
    const said = await until('the leader says it refused the run', () =>
      leaderSaid('warn', /refused/).length > 0 ? leaderSaid('warn', /refused/) : undefined,
    );
    assert.equal(said.length, 1, 'throttled');
    assert.equal(said[0]!.fields.replica, 'f-raw');
    assert.match(String(said[0]!.fields.reason), /part 1 where part 0 was due/);
  });

  it('a second follower refused for the same cause while the first still is is named too, each once a minute', async () => {
    // f-raw was named for its run above the limit by the first test, within this minute; f-second joins it.
    for (let i = 0; i < 2; i++) {
      for (const replica of ['f-raw', 'f-second']) {
        const { reason } = await refusedWith([partFrame(0, 20), partFrame(1, 20)], replica);
        assert.match(reason, /above runBytesMax/);
      }
    }
    const named = (replica: string): number =>
      leaderSaid('error', /epoch\.runBytesMax/).filter((l) => l.fields.replica === replica).length;
    await until('the leader names the second follower', () => named('f-second') || undefined);
    assert.equal(named('f-second'), 1, 'the second, once');
    assert.equal(named('f-raw'), 1, 'the first, still once');
  });
});
