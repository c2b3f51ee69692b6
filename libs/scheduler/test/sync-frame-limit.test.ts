// A snapshot of a very large cluster can outgrow the sync frame limit. The
// follower's WebSocket then refused the frame and closed (seen as 1006), the
// follower redialled and got the same frame, for ever, saying only "sync
// connection to the leader closed" at info. Real replicas on loopback with a
// small limit, and a runtime whose state makes the snapshot bigger than it.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { MemoryLeaseStore } from '@switchyard/election';
import type { RuntimeNode } from '@switchyard/runtime';
import type { SchedulerReplica } from '@switchyard/scheduler';
import { getJson, recordingLogger, startReplicas, startRuntime, until, type LoggedLine } from './support.ts';

const FRAME_BYTES_MAX = 200;

describe('a sync frame above epoch.frameBytesMax', () => {
  const lines: LoggedLine[] = [];
  let replicas: SchedulerReplica[] = [];
  let runtime: RuntimeNode | undefined;
  const store = new MemoryLeaseStore();

  before(async () => {
    const epoch = { cycleIntervalMs: 200, frameBytesMax: FRAME_BYTES_MAX };
    const start = async (id: string): Promise<SchedulerReplica> =>
      (await startReplicas(1, store, recordingLogger(id, lines), { replicaId: id, epoch }))[0]!;
    replicas.push(await start('s0'));
    await until('s0 leads', () => replicas[0]!.isLeader || undefined);
    // The follower's first frame is a snapshot of the epoch, this runtime included: above the limit.
    runtime = await startRuntime('rt-with-a-long-enough-state', replicas[0]!.url);
    await until(
      'the runtime in the epoch',
      async () => (await getJson(`${replicas[0]!.url}/api/runtimes`)).body.runtimes?.length || undefined,
    );
    replicas.push(await start('s1'));
  });
  after(async () => {
    await runtime?.close();
    await Promise.all(replicas.map((r) => r.close()));
    replicas = [];
  });

  it('is an error on the follower naming the limit, and a warning on the leader naming the size, each once', async () => {
    const leader = replicas.find((r) => r.isLeader)!;
    const follower = replicas.find((r) => r !== leader)!;
    const refused = await until('the follower says the frame was too large', () =>
      lines.find((l) => l.replica === follower.replicaId && l.level === 'error'),
    );
    assert.match(refused.msg, /frameBytesMax/);
    assert.equal(refused.fields.frameBytesMax, FRAME_BYTES_MAX);
    const sent = await until('the leader says it sent a frame above the limit', () =>
      lines.find((l) => l.replica === leader.replicaId && l.level === 'warn' && /frameBytesMax/.test(l.msg)),
    );
    assert.ok((sent.fields.bytes as number) > FRAME_BYTES_MAX, `frame of ${String(sent.fields.bytes)} bytes`);
    assert.equal(sent.fields.frameBytesMax, FRAME_BYTES_MAX);
    // The follower redials every few hundred ms and is refused each time: the lines are throttled.
    await new Promise((resolve) => setTimeout(resolve, 1500));
    const said = (replica: string, level: string): number =>
      lines.filter((l) => l.replica === replica && l.level === level && /frameBytesMax/.test(l.msg)).length;
    assert.equal(said(follower.replicaId, 'error'), 1);
    assert.equal(said(leader.replicaId, 'warn'), 1);
  });
});
