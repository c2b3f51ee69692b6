// A snapshot sent in parts whose frames together pass epoch.runBytesMax is refused (1008) at every redial,
// and the follower said so only at warn, "sync connection to the leader closed", each time. Real replicas on
// loopback: two runtimes make the snapshot a run of two parts, each within the frame limit, above a small
// run limit.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { MemoryLeaseStore } from '@switchyard/election';
import type { RuntimeNode } from '@switchyard/runtime';
import type { SchedulerReplica } from '@switchyard/scheduler';
import { getJson, recordingLogger, startReplicas, startRuntime, until, type LoggedLine } from './support.ts';

/**
 * Room in a part for one runtime of an id this long (some 350 bytes, and 560 the part counts besides) but not
 * two, so the snapshot goes in parts.
 */
const FRAME_BYTES_MAX = 1000;
const LONG = 'x'.repeat(100);
/** Below one part: the run is refused at its first. */
const RUN_BYTES_MAX = 300;

describe('a run of sync parts above epoch.runBytesMax', () => {
  const lines: LoggedLine[] = [];
  let replicas: SchedulerReplica[] = [];
  const runtimes: RuntimeNode[] = [];
  const store = new MemoryLeaseStore();

  before(async () => {
    const epoch = { cycleIntervalMs: 200, frameBytesMax: FRAME_BYTES_MAX, runBytesMax: RUN_BYTES_MAX };
    const start = async (id: string): Promise<SchedulerReplica> =>
      (await startReplicas(1, store, recordingLogger(id, lines), { replicaId: id, epoch }))[0]!;
    replicas.push(await start('s0'));
    await until('s0 leads', () => replicas[0]!.isLeader || undefined);
    for (const id of [`rt-a-${LONG}`, `rt-b-${LONG}`]) runtimes.push(await startRuntime(id, replicas[0]!.url));
    await until(
      'both runtimes in the epoch',
      async () => (await getJson(`${replicas[0]!.url}/api/runtimes`)).body.runtimes?.length === 2 || undefined,
    );
    replicas.push(await start('s1'));
  });
  after(async () => {
    await Promise.all(runtimes.map((r) => r.close()));
    await Promise.all(replicas.map((r) => r.close()));
    replicas = [];
  });

  it('is an error on the follower naming the limit, once', async () => {
    const follower = replicas.find((r) => !r.isLeader)!;
    const refused = await until('the follower says the run was too large', () =>
      lines.find((l) => l.replica === follower.replicaId && l.level === 'error'),
    );
    assert.match(refused.msg, /epoch\.runBytesMax/);
    assert.equal(refused.fields.runBytesMax, RUN_BYTES_MAX);
    // The follower redials every few hundred ms and is refused each time: the line is throttled, and the
    // refusals say nothing else above debug.
    await new Promise((resolve) => setTimeout(resolve, 1500));
    const said = (level: string): LoggedLine[] =>
      lines.filter((l) => l.replica === follower.replicaId && l.level === level);
    assert.equal(said('error').length, 1);
    assert.deepEqual(
      said('warn').map((l) => l.msg),
      [],
    );
    assert.equal(
      said('info').filter((l) => l.msg === 'following').length > 1,
      true,
      'the follower redialled and was refused again',
    );
  });
});
