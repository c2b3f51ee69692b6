// A follower whose connection refuses a delta gets the latest epoch whole at the next cycle. One that reads slower
// than the cluster changes refuses the delta after each such snapshot, and gets snapshot after snapshot: it
// converges, but each costs the whole cluster's state, and nothing said so (its epoch lag at most). The leader now
// counts every snapshot it sends by reason, and warns, naming the follower, of one sent three or more in a row
// for refusing deltas, at most once a minute.
// Such a follower now gets one delta from the epoch it took last, while the leader keeps that epoch: the snapshots
// and the warning are left for one that misses more epochs than the leader keeps (here it keeps one). Those deltas
// are counted apart (epoch_catch_up_deltas_total), the only sign of a follower that falls behind and catches up.
// A real leader and real followers on in-memory links; the slow follower's link has a small send buffer that
// fills with what the leader sends and empties only when the test lets that follower read.
import { afterEach, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { ManualClock } from '@switchyard/clock/testing';
import { EpochFollower, EpochLeader, type EpochSink } from '@switchyard/epoch';
import { MemoryLink, referenceApply, referenceDiff, referenceMerge, runtimeState } from '@switchyard/epoch/testing';
import type { RuntimeState } from '@switchyard/protocol';
import { createMetrics } from '@switchyard/service';
import { FOLLOWER_BEHIND_LOG_INTERVAL_MS, FollowerSnapshots } from '../src/follower-snapshots.ts';
import { createReplicaMetrics } from '../src/metrics.ts';
import { recordingLogger, type LoggedLine } from './support.ts';

const CYCLE_MS = 1000;
const SLOW_BUFFER_BYTES_MAX = 512;

/** A runtime of `owner` with `threads` sessions of one sandbox. */
const runtimeWith = (id: string, owner: string, threads: number): RuntimeState =>
  runtimeState(
    id,
    owner,
    Array.from({ length: threads }, (_, i) => `p1/thread-${i}`),
  );

/** A follower whose sink keeps only the epoch it holds. */
function follower(replica: string, clock: ManualClock): { follower: EpochFollower; epoch: () => number } {
  let held = 0;
  const sink: EpochSink = { snapshot: (epoch) => (held = epoch), delta: (epoch) => (held = epoch) };
  const part = [runtimeWith(`${replica}-r1`, replica, 1)];
  const f = new EpochFollower({
    replicaId: replica,
    clock,
    localPart: () => part,
    diff: referenceDiff,
    apply: referenceApply,
    sink,
  });
  return { follower: f, epoch: () => held };
}

describe('a follower that reads slower than the cluster changes', () => {
  const stops: Array<() => void> = [];
  afterEach(() => {
    for (const stop of stops.splice(0).reverse()) stop();
  });

  /** A leader that keeps `keepEpochs` epochs, a fast follower, and a slow one. */
  function start(keepEpochs: number) {
    const clock = new ManualClock();
    const lines: LoggedLine[] = [];
    const logger = recordingLogger('leader', lines);
    const metrics = createReplicaMetrics(createMetrics('scheduler'), {
      busiestTunnelStreams: () => 0,
      runtimesOverStateLimit: () => 0,
      epochLagSeconds: () => 0,
    });
    const snapshots = new FollowerSnapshots(logger, clock, (reason) => metrics.snapshotsSent.inc({ reason }));
    let leaderPart: RuntimeState[] = [runtimeWith('leader-r1', 'leader', 1)];
    const leader = new EpochLeader({
      replicaId: 'leader',
      term: 1,
      clock,
      cycleIntervalMs: CYCLE_MS,
      localPart: () => leaderPart,
      merge: referenceMerge,
      diff: referenceDiff,
      apply: referenceApply,
      onSnapshotSent: (info) => snapshots.sent(info),
      onCatchUpSent: () => metrics.catchUpDeltas.inc(),
      keepEpochs,
    });
    stops.push(() => leader.stop());
    const fast = follower('fast', clock);
    const slow = follower('slow', clock);
    stops.push(
      () => fast.follower.stop(),
      () => slow.follower.stop(),
    );
    const fastLink = new MemoryLink();
    const slowLink = new MemoryLink();
    // What the leader sends the slow follower stays in its buffer until it reads.
    slowLink.a.bufferedBytesMax = SLOW_BUFFER_BYTES_MAX;
    slowLink.drop = (msg, from) => {
      if (from === 'a') slowLink.a.bufferedBytes += JSON.stringify(msg).length;
      return false;
    };
    fast.follower.attach(fastLink.b);
    slow.follower.attach(slowLink.b);
    leader.attach(fastLink.a, 'fast');
    leader.attach(slowLink.a, 'slow');
    let changes = 0;
    return {
      clock,
      lines,
      leader,
      fast,
      slow,
      /** One cycle, the slow follower reading all it was sent first if `reads`, in which the cluster changes if `changes`. */
      async cycle(reads: boolean, change = true): Promise<void> {
        if (reads) slowLink.a.bufferedBytes = 0;
        if (change) {
          leaderPart = [...leaderPart, runtimeWith(`leader-extra-${changes++}`, 'leader', 20)];
          leader.notifyChange();
        }
        await clock.advance(CYCLE_MS);
      },
      async sent(): Promise<Record<string, number>> {
        const { values } = await metrics.snapshotsSent.get();
        return Object.fromEntries(values.map((v) => [String(v.labels.reason), v.value]));
      },
      catchUps: async (): Promise<number> => (await metrics.catchUpDeltas.get()).values[0]?.value ?? 0,
      warnings: () => lines.filter((l) => l.level === 'warn'),
    };
  }

  it('gets one delta per read while the leader keeps the epoch it took, counted: no snapshot, no warning', async () => {
    const c = start(5);
    await c.clock.advance(CYCLE_MS);
    assert.equal(await c.catchUps(), 0, 'none while both take every delta');
    for (let i = 0; i < 12; i++) await c.cycle(i % 2 === 0);
    assert.deepEqual(await c.sent(), { attached: 2 });
    // Each read but the first follows a delta its full buffer refused: one catch-up each, the slow follower's alone
    // (the fast one took every delta as it was committed).
    assert.equal(await c.catchUps(), 5);
    assert.equal(c.warnings().length, 0);
    await c.cycle(true, false);
    assert.equal(c.slow.epoch(), c.leader.latest()?.epoch, 'the slow follower converged');
  });

  it('is counted by reason, warned of once a minute by name, and converges once it keeps up', async () => {
    // The leader keeps the latest epoch only: a follower that missed one gets a snapshot.
    const c = start(1);
    await c.clock.advance(CYCLE_MS);
    assert.equal(c.slow.epoch(), c.leader.latest()?.epoch, 'the first epoch reached both');
    // It reads once every two changes: each snapshot it gets fills its buffer, and the next delta is refused.
    for (let i = 0; i < 12; i++) await c.cycle(i % 2 === 0);
    const sent = await c.sent();
    assert.equal(sent.attached, 2, 'each follower got a snapshot when it attached');
    assert.ok((sent.behind ?? 0) >= 4, `snapshots for refused deltas: ${JSON.stringify(sent)}`);
    assert.equal(c.fast.epoch(), c.leader.latest()?.epoch, 'the fast follower took every delta');
    const warnings = c.warnings();
    assert.equal(warnings.length, 1, 'one warning within the minute');
    assert.equal(warnings[0]!.fields.replica, 'slow');
    assert.ok(Number(warnings[0]!.fields.snapshots) >= 3);
    assert.match(warnings[0]!.msg, /reads slower than the cluster changes/);

    // It keeps up from now on: a delta taken ends its run of snapshots, and once the cluster is quiet it holds
    // the latest epoch.
    for (let i = 0; i < 3; i++) await c.cycle(true);
    for (let i = 0; i < 3; i++) await c.cycle(true, false);
    assert.equal(c.slow.epoch(), c.leader.latest()?.epoch, 'the slow follower converged');
    const behindBefore = (await c.sent()).behind;
    // A minute on, it falls behind for two snapshots only: below the three in a row, no warning.
    await c.clock.advance(FOLLOWER_BEHIND_LOG_INTERVAL_MS);
    for (let i = 0; i < 4; i++) await c.cycle(i % 2 === 0);
    assert.equal((await c.sent()).behind, behindBefore! + 2);
    assert.equal(c.warnings().length, 1, 'no warning for two snapshots after a delta taken');
  });

  it('warns of a second follower behind while the first still is, each by name once a minute', async () => {
    const clock = new ManualClock();
    const lines: LoggedLine[] = [];
    const snapshots = new FollowerSnapshots(recordingLogger('leader', lines), clock, () => {});
    const warned = (replica: string): number =>
      lines.filter((l) => l.level === 'warn' && l.fields.replica === replica).length;
    // Both fall behind, in turn, snapshot after snapshot, within the minute.
    for (let epoch = 1; epoch <= 6; epoch++) {
      for (const replica of ['slow-a', 'slow-b'])
        snapshots.sent({ replica, reason: 'behind', epoch, behindInARow: 2 + epoch });
      await clock.advance(CYCLE_MS);
    }
    assert.equal(warned('slow-a'), 1, 'the first warned of once');
    assert.equal(warned('slow-b'), 1, 'the second warned of too, once');
    await clock.advance(FOLLOWER_BEHIND_LOG_INTERVAL_MS);
    snapshots.sent({ replica: 'slow-b', reason: 'behind', epoch: 7, behindInARow: 9 });
    const again = lines.filter((l) => l.level === 'warn').at(-1)!;
    assert.equal(again.fields.replica, 'slow-b');
    assert.equal(again.fields.unlogged, 5, 'the snapshots held back for that follower alone');
  });
});
