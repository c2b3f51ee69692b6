// A delta (commit or collect) carries at most SYNC_OPS_MAX ops (`syncMessageSchema`). One with more went out
// whole: within the frame limit, the receiver refused it as invalid and closed the connection (1008), and the
// replica kept its stale epoch or part until a redial. Such a delta now goes as a snapshot, or as the full
// part, in parts, like a delta above the frame limit. Real WebSockets on loopback with a frame limit above the
// delta, so that the op count alone is what the receiver would refuse.
import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { systemClock } from '@switchyard/clock';
import { SYNC_OPS_MAX } from '@switchyard/protocol';
import type { RuntimeState } from '@switchyard/protocol';
import { EpochLeader, connectSync } from '@switchyard/epoch';
import type { SyncConnection } from '@switchyard/epoch';
import { referenceApply, referenceDiff, referenceMerge } from '@switchyard/epoch/testing';
import { recordingFollower, runtimeState } from './support/cluster.ts';
import { serveLeader } from './support/serve-leader.ts';
import { pollUntil } from './support/until.ts';

/** Far above a delta of SYNC_OPS_MAX ops (some 60 MB). */
const FRAME_BYTES_MAX = 256 * 1024 * 1024;

const until = (check: () => boolean, what: string, timeoutMs = 60_000): Promise<void> =>
  pollUntil(check, what, timeoutMs);

/** A runtime joining with SYNC_OPS_MAX processes: its upsert and their adds make one op too many. */
function hugeRuntime(id: string, owner: string): RuntimeState {
  const processes = Array.from({ length: SYNC_OPS_MAX }, (_, i) => `p${i}`);
  return { ...runtimeState(id, owner), processes };
}

const processCount = (states: readonly RuntimeState[] | undefined, id: string): number | undefined =>
  states?.find((s) => s.runtime.id === id)?.processes.length;

/** `conn`, and how it closed once it has (a SyncConnection takes one close handler: its user's). */
function observeClose(conn: SyncConnection): { conn: SyncConnection; closed: () => string | undefined } {
  let closed: string | undefined;
  const observed: SyncConnection = {
    send: (msg) => conn.send(msg),
    onMessage: (cb) => conn.onMessage(cb),
    onClose: (cb) =>
      conn.onClose((code, reason) => {
        closed = `${code} ${reason}`;
        cb(code, reason);
      }),
    close: (code, reason) => conn.close(code, reason),
    get bufferedBytes() {
      return conn.bufferedBytes;
    },
    peerReadsLatestEpoch: conn.peerReadsLatestEpoch ?? false,
  };
  return { conn: observed, closed: () => closed };
}

describe('a delta above SYNC_OPS_MAX ops', () => {
  const closers: Array<() => unknown> = [];
  after(async () => {
    for (const close of closers.reverse()) await close();
  });

  async function leaderOf(part: () => RuntimeState[]): Promise<{ leader: EpochLeader; base: string }> {
    const leader = new EpochLeader({
      replicaId: 'leader',
      term: 1,
      clock: systemClock,
      localPart: part,
      merge: referenceMerge,
      diff: referenceDiff,
      apply: referenceApply,
      cycleIntervalMs: 50,
      debounceMs: 5,
    });
    const base = await serveLeader(leader, closers, { payloadBytesMax: FRAME_BYTES_MAX });
    return { leader, base };
  }

  async function follower(replica: string, base: string, part: () => RuntimeState[]) {
    const made = recordingFollower(replica, part);
    closers.push(() => made.follower.stop());
    const observed = observeClose(await connectSync(base, replica, { payloadBytesMax: FRAME_BYTES_MAX }));
    made.follower.attach(observed.conn);
    return { ...made, closed: observed.closed };
  }

  it("reaches the follower as a snapshot of the leader's epoch, on the same connection", async () => {
    let part: RuntimeState[] = [runtimeState('leader-r1', 'leader')];
    const { leader, base } = await leaderOf(() => part);
    const { sink, closed } = await follower('f1', base, () => []);
    await until(() => sink.applied.length > 0, 'the first epoch');
    part = [...part, hugeRuntime('huge', 'leader')];
    leader.notifyChange();
    await until(
      () => closed() !== undefined || processCount(sink.states, 'huge') === SYNC_OPS_MAX,
      'the change, or a close',
    );
    assert.equal(closed(), undefined, 'the connection stays open');
    assert.deepEqual(
      { epoch: sink.last!.epoch, kind: sink.last!.kind },
      { epoch: leader.latest()!.epoch, kind: 'snapshot' },
    );
  });

  it('reaches the leader as the full part, on the same connection', async () => {
    const { leader, base } = await leaderOf(() => []);
    let own: RuntimeState[] = [runtimeState('f2-r1', 'f2')];
    const { follower: f, closed } = await follower('f2', base, () => own);
    await until(() => processCount(leader.latestStates(), 'f2-r1') === 0, "the follower's first part");
    own = [...own, hugeRuntime('huge', 'f2')];
    f.notifyChange();
    await until(
      () => closed() !== undefined || processCount(leader.latestStates(), 'huge') === SYNC_OPS_MAX,
      'the change committed, or a close',
    );
    assert.equal(closed(), undefined, 'the connection stays open');
  });
});
