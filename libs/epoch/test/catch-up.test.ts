// A follower whose connection refused a delta got the latest epoch whole at the next cycle. On a slow link that
// snapshot, far bigger than the deltas it missed, filled its buffer again, so it refused the next delta too:
// snapshot after snapshot. Once its connection takes messages again, such a follower now gets one delta from the
// epoch it last took to the latest, and a snapshot only when the leader no longer keeps that epoch or the delta
// would be as large as the state. A delta refused for its size still goes as a snapshot, counted apart. Each
// catch-up delta is reported (onCatchUpSent), the deltas every follower gets as epochs commit are not: once no
// snapshot marks a follower that fell behind, that report is what shows it.
// Real WebSockets on loopback, the follower's socket paused as a slow reader's; the leader on a manual clock.
import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { WebSocket } from 'ws';
import { ManualClock } from '@switchyard/clock/testing';
import type { RuntimeState } from '@switchyard/protocol';
import { EpochLeader, wsSyncConnection } from '@switchyard/epoch';
import type { CatchUpInfo, EpochLeaderOptions, SnapshotReason, WsSyncConnectionOptions } from '@switchyard/epoch';
import { canonicalStates, referenceApply, referenceDiff, referenceMerge } from '@switchyard/epoch/testing';
import { recordingFollower, runtimeState } from './support/cluster.ts';
import { fleet, pausedSocketPair } from './support/runs.ts';
import { pollUntil } from './support/until.ts';

const BUFFERED_BYTES_MAX = 64 * 1024;
const CYCLE_MS = 1000;
/** Changes the follower misses while its socket is paused. */
const MISSED = 4;

const until = (check: () => boolean, what: string): Promise<void> => pollUntil(check, what, 20_000);

/** A runtime of the leader's with `threads` sessions, `tag` naming them. */
const extra = (n: number, threads: number, tag = 't'): RuntimeState =>
  runtimeState(
    `leader-extra-${n}`,
    'leader',
    Array.from({ length: threads }, (_, i) => `p${n}/${tag}${i}`),
  );

describe('a follower whose connection was busy', () => {
  const closers: Array<() => unknown> = [];
  after(async () => {
    for (const close of closers.reverse()) await close();
  });

  /**
   * A leader holding `initial`, and a follower attached to it over a paused socket; `snapshots` records the
   * reasons of the snapshots the leader sent, `catchUps` the catch-up deltas.
   */
  async function start(
    initial: RuntimeState[],
    leaderOptions: Partial<EpochLeaderOptions> = {},
    linkOptions: WsSyncConnectionOptions = {},
  ) {
    const clock = new ManualClock();
    const snapshots: SnapshotReason[] = [];
    const catchUps: CatchUpInfo[] = [];
    let part = initial;
    const leader = new EpochLeader({
      replicaId: 'leader',
      term: 1,
      clock,
      cycleIntervalMs: CYCLE_MS,
      // A cycle commits within the advance that starts it, whether or not the follower answers in time.
      cycleTimeoutMs: CYCLE_MS / 2,
      localPart: () => part,
      merge: referenceMerge,
      diff: referenceDiff,
      apply: referenceApply,
      onSnapshotSent: (info) => snapshots.push(info.reason),
      onCatchUpSent: (info) => catchUps.push(info),
      ...leaderOptions,
    });
    closers.push(() => leader.stop());
    await clock.advance(CYCLE_MS);
    const { server, client } = await pausedSocketPair(closers);
    const connection = (ws: WebSocket): ReturnType<typeof wsSyncConnection> =>
      wsSyncConnection(ws, { bufferedBytesMax: BUFFERED_BYTES_MAX, ...linkOptions });
    const leaderSide = connection(server);
    const { follower, sink } = recordingFollower('slow', () => []);
    closers.push(() => follower.stop());
    follower.attach(connection(client));
    leader.attach(leaderSide, 'slow');
    return {
      clock,
      leader,
      leaderSide,
      client,
      sink,
      snapshots,
      catchUps,
      /** Gives the leader a new part and lets a cycle commit it. */
      async change(next: RuntimeState[]): Promise<void> {
        const before = leader.latest()!.epoch;
        part = next;
        leader.notifyChange();
        await clock.advance(CYCLE_MS);
        assert.equal(leader.latest()!.epoch, before + 1, 'the change committed');
      },
      /** Waits until the follower holds the leader's latest epoch. */
      untilLatest: (): Promise<void> =>
        until(() => sink.last?.epoch === leader.latest()!.epoch, "the leader's latest epoch"),
      /** The epochs the follower applied, as `epoch:kind`. */
      applied: (): string[] => sink.applied.map((a) => `${a.epoch}:${a.kind}`),
      /** Whether the follower holds the leader's latest epoch and state. */
      converged: (): boolean =>
        sink.last?.epoch === leader.latest()!.epoch &&
        canonicalStates(sink.states) === canonicalStates(leader.latestStates()!),
    };
  }

  /**
   * A leader of a large fleet whose attach snapshot (some 11 MB, sent whole) fills the paused follower's socket,
   * so the connection refuses what comes next.
   */
  async function startBusy(leaderOptions: Partial<EpochLeaderOptions> = {}) {
    const initial = fleet(50);
    const c = await start(initial, leaderOptions, { peerReadsParts: false });
    await until(() => c.leaderSide.bufferedBytes > BUFFERED_BYTES_MAX, 'the snapshot filled the socket');
    const attachedAt = c.leader.latest()!.epoch;
    let part = initial;
    for (let n = 0; n < MISSED; n++) await c.change((part = [...part, extra(n, 20)]));
    assert.equal(c.leader.latest()!.epoch, attachedAt + MISSED, 'a commit per change');
    /** Lets the follower read all it was sent, then a cycle run, and waits until it holds the latest epoch. */
    const drainToLatest = async (): Promise<void> => {
      c.client.resume();
      await until(() => c.sink.last?.epoch === attachedAt && c.leaderSide.bufferedBytes === 0, 'the snapshot read');
      await c.clock.advance(CYCLE_MS);
      await c.untilLatest();
    };
    return { ...c, attachedAt, drainToLatest, lastPart: part };
  }

  it('gets one delta from the epoch it took to the latest, not a snapshot, once it drains', async () => {
    const c = await startBusy();
    await c.drainToLatest();
    assert.deepEqual(c.applied(), [`${c.attachedAt}:snapshot`, `${c.attachedAt + MISSED}:delta`]);
    assert.ok(c.converged(), "the leader's state");
    assert.deepEqual(c.snapshots, ['attached']);
    assert.deepEqual(c.catchUps, [{ replica: 'slow', baseEpoch: c.attachedAt, epoch: c.attachedAt + MISSED }]);
    // Caught up, it takes the next epoch as every follower does: no catch-up reported for it.
    await c.change([...c.lastPart, extra(MISSED, 1)]);
    await until(() => c.sink.last?.epoch === c.leader.latest()!.epoch, 'the next epoch');
    assert.equal(c.sink.last!.kind, 'delta');
    assert.equal(c.catchUps.length, 1, JSON.stringify(c.catchUps));
  });

  it('gets a snapshot once the epoch it took has left the history', async () => {
    const c = await startBusy({ keepEpochs: MISSED });
    await c.drainToLatest();
    assert.deepEqual(c.applied(), [`${c.attachedAt}:snapshot`, `${c.attachedAt + MISSED}:snapshot`]);
    assert.ok(c.converged(), "the leader's state");
    assert.deepEqual(c.snapshots, ['attached', 'behind']);
    assert.deepEqual(c.catchUps, []);
  });

  it('gets a snapshot when what changed meanwhile is as large as the state', async () => {
    // A small cluster: every session of its one runtime replaced, many times over, while the follower is busy.
    const c = await start([extra(0, 20)]);
    c.client.resume();
    await until(() => c.sink.applied.length === 1, 'the attach snapshot');
    c.client.pause();
    // Each delta is about as large as the state: a few fill the paused socket.
    const filled = (): boolean => c.leaderSide.bufferedBytes > BUFFERED_BYTES_MAX;
    for (let n = 1; n <= 1000 && !filled(); n++) await c.change([extra(0, 400, `r${n}-`)]);
    assert.ok(filled(), 'the socket filled');
    const took = c.leader.latest()!.epoch;
    await c.change([extra(0, 400, 'last')]);
    c.client.resume();
    await until(() => c.sink.last?.epoch === took && c.leaderSide.bufferedBytes === 0, 'what it took, read');
    await c.clock.advance(CYCLE_MS);
    await c.untilLatest();
    assert.equal(c.sink.last!.kind, 'snapshot');
    assert.ok(c.converged(), "the leader's state");
    assert.deepEqual(c.snapshots, ['attached', 'behind']);
    assert.deepEqual(c.catchUps, []);
  });

  it('gets a snapshot, counted as oversized, for a delta above its frame limit', async () => {
    const c = await start([extra(0, 1)], {}, { payloadBytesMax: 16 * 1024 });
    c.client.resume();
    await until(() => c.sink.applied.length === 1, 'the attach snapshot');
    await c.change([extra(0, 1), extra(1, 1000)]);
    await c.untilLatest();
    assert.equal(c.sink.last!.kind, 'snapshot');
    assert.ok(c.converged(), "the leader's state");
    assert.deepEqual(c.snapshots, ['attached', 'oversized']);
    assert.deepEqual(c.catchUps, []);
  });
});
