// A commit's snapshot carries every runtime of the cluster with its processes and threads, and a follower's full
// part all of its runtimes: past `payloadBytesMax` (epoch.frameBytesMax) no follower could sync, whatever else
// it did. Between replicas that list `SYNC_FEATURES.parts`, such a message goes as a run of `part` frames, each
// within the limit, closed by a `commit-end` or `collect-end`. Real WebSockets on loopback, a 64 KiB limit.
import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { AddressInfo } from 'node:net';
import { WebSocket, WebSocketServer } from 'ws';
import { systemClock } from '@switchyard/clock';
import { SYNC_FEATURES, SYNC_FEATURES_HEADER } from '@switchyard/protocol';
import type { RuntimeState } from '@switchyard/protocol';
import { EpochLeader, connectSync } from '@switchyard/epoch';
import type { SyncConnection } from '@switchyard/epoch';
import { canonicalStates, referenceApply, referenceDiff, referenceMerge } from '@switchyard/epoch/testing';
import { recordingFollower, runtimeState } from './support/cluster.ts';
import { serveLeader } from './support/serve-leader.ts';
import { pollUntil } from './support/until.ts';

/** The smallest `epoch.frameBytesMax` a scheduler takes. */
const FRAME_BYTES_MAX = 64 * 1024;

const until = (check: () => boolean, what: string, timeoutMs = 5000): Promise<void> =>
  pollUntil(check, what, timeoutMs);

/** A runtime hosting `threads` sessions over 40 processes: some 55 bytes of JSON a session. */
function busyRuntime(id: string, owner: string, threads: number): RuntimeState {
  return runtimeState(
    id,
    owner,
    Array.from({ length: threads }, (_, i) => `proc-${i % 40}/session-${String(i).padStart(8, '0')}`),
  );
}

/** One runtime bigger than a frame by itself, and twenty small ones: a snapshot of about 240 KB. */
const leaderPart = (sessions = 3000): RuntimeState[] => [
  busyRuntime('leader-r1', 'leader', sessions),
  ...Array.from({ length: 20 }, (_, i) => busyRuntime(`leader-small-${i}`, 'leader', 10)),
];

const threadCount = (states: readonly RuntimeState[] | undefined, id: string): number | undefined =>
  states?.find((s) => s.runtime.id === id)?.threads.length;

/** `conn`, and a promise of its close code and reason (a SyncConnection takes one close handler: its user's). */
function observeClose(conn: SyncConnection): { conn: SyncConnection; closed: Promise<[number, string]> } {
  let resolve!: (value: [number, string]) => void;
  const closed = new Promise<[number, string]>((r) => (resolve = r));
  const observed: SyncConnection = {
    send: (msg) => conn.send(msg),
    onMessage: (cb) => conn.onMessage(cb),
    onClose: (cb) =>
      conn.onClose((code, reason) => {
        resolve([code, reason]);
        cb(code, reason);
      }),
    close: (code, reason) => conn.close(code, reason),
    get bufferedBytes() {
      return conn.bufferedBytes;
    },
    peerReadsLatestEpoch: conn.peerReadsLatestEpoch ?? false,
  };
  return { conn: observed, closed };
}

// Frames as a leader of this release writes them, for scripted leaders.
const snapshotFrame = (epoch: number, runtimes: RuntimeState[], term = 1): string =>
  JSON.stringify({ type: 'commit', term, epoch, body: { kind: 'snapshot', snapshot: { epoch, term, runtimes } } });
const partFrame = (epoch: number, part: number, runtimes: RuntimeState[], term = 1): string =>
  JSON.stringify({ type: 'part', term, epoch, part, runtimes });
const commitEndFrame = (epoch: number, parts: number, term = 1): string =>
  JSON.stringify({ type: 'commit-end', term, epoch, parts });

/** Epoch 2 in two parts: runtime `a` cut across them (its processes in the first), then `b`. */
const EPOCH_2 = [runtimeState('a', 'leader', ['p1/t1', 'p1/t2', 'p2/t3']), runtimeState('b', 'leader', ['p3/t4'])];
const [A, B] = EPOCH_2 as [RuntimeState, RuntimeState];
const EPOCH_2_PARTS = [
  partFrame(2, 0, [{ runtime: A.runtime, processes: A.processes, threads: A.threads.slice(0, 1) }]),
  partFrame(2, 1, [{ runtime: A.runtime, processes: [], threads: A.threads.slice(1) }, B]),
];
const EPOCH_1 = [runtimeState('a', 'leader', ['p1/t1'])];

describe('epoch sync messages in parts', () => {
  const closers: Array<() => unknown> = [];
  after(async () => {
    for (const close of closers.reverse()) await close();
  });

  /** A leader of this release behind a sync server limited to FRAME_BYTES_MAX; its base URL and frames it warned of. */
  async function leaderOf(part: () => RuntimeState[]): Promise<{ leader: EpochLeader; base: string; large: number[] }> {
    const large: number[] = [];
    const leader = new EpochLeader({
      replicaId: 'leader',
      term: 1,
      clock: systemClock,
      localPart: part,
      merge: referenceMerge,
      diff: referenceDiff,
      apply: referenceApply,
      cycleIntervalMs: 50,
      // Scripted followers do not answer announces.
      cycleTimeoutMs: 200,
      debounceMs: 5,
    });
    const base = await serveLeader(leader, closers, {
      payloadBytesMax: FRAME_BYTES_MAX,
      onLargeFrame: (_replica, bytes) => large.push(bytes),
    });
    return { leader, base, large };
  }

  /**
   * A scripted leader: connection `i` runs `scripts[i]`. It lists the features of this release. Returns its base URL
   * and the frames followers sent it.
   */
  async function scriptedLeader(scripts: Array<(ws: WebSocket) => void>): Promise<{ base: string; got: string[] }> {
    const wss = new WebSocketServer({ port: 0, host: '127.0.0.1', perMessageDeflate: false });
    closers.push(() => {
      for (const ws of wss.clients) ws.terminate();
      return new Promise((resolve) => wss.close(resolve));
    });
    await new Promise((resolve) => wss.once('listening', resolve));
    const features = Object.values(SYNC_FEATURES).join(', ');
    wss.on('headers', (headers) => headers.push(`${SYNC_FEATURES_HEADER}: ${features}`));
    const got: string[] = [];
    let connections = 0;
    wss.on('connection', (ws) => {
      ws.on('message', (data) => got.push(data.toString()));
      scripts[connections++]?.(ws);
    });
    return { base: `http://127.0.0.1:${(wss.address() as AddressInfo).port}`, got };
  }

  function follower(replica: string, part: () => RuntimeState[] = () => []) {
    const made = recordingFollower(replica, part);
    closers.push(() => made.follower.stop());
    return made;
  }

  it('a leader and a follower sync a snapshot and a full part each bigger than a frame', async () => {
    const ownPart = [busyRuntime('f1-r1', 'f1', 2500)];
    let part = leaderPart();
    const { leader, base, large } = await leaderOf(() => part);
    const { follower: f, sink } = follower('f1', () => ownPart);
    f.attach(await connectSync(base, 'f1', { payloadBytesMax: FRAME_BYTES_MAX }));
    await until(() => threadCount(sink.states, 'f1-r1') === 2500, "the follower's own part committed back to it");
    assert.equal(threadCount(leader.latestStates(), 'f1-r1'), 2500, "the leader took the follower's whole part");
    assert.equal(threadCount(sink.states, 'leader-r1'), 3000);
    assert.equal(canonicalStates(sink.states), canonicalStates(leader.latestStates()!));
    assert.ok(sink.applied.some((a) => a.kind === 'snapshot'));
    // Deltas go on as single messages.
    part = leaderPart(3001);
    leader.notifyChange();
    await until(() => threadCount(sink.states, 'leader-r1') === 3001, 'the change');
    assert.equal(sink.last!.kind, 'delta');
    assert.deepEqual(large, [], 'no frame above the limit was sent');
  });

  it('a delta above frameBytesMax reaches the follower as a snapshot of its epoch, in parts', async () => {
    let part = leaderPart(10);
    const { leader, base, large } = await leaderOf(() => part);
    const { follower: f, sink } = follower('f7');
    const { conn, closed } = observeClose(await connectSync(base, 'f7', { payloadBytesMax: FRAME_BYTES_MAX }));
    f.attach(conn);
    await until(() => threadCount(sink.states, 'leader-r1') === 10, 'the first epoch');
    // A runtime of 3,000 sessions joins: some 250 KB of ops.
    part = leaderPart(3000);
    leader.notifyChange();
    await until(() => threadCount(sink.states, 'leader-r1') === 3000, 'the change');
    assert.deepEqual(
      { epoch: sink.last!.epoch, kind: sink.last!.kind },
      { epoch: leader.latest()!.epoch, kind: 'snapshot' },
    );
    assert.deepEqual(large, []);
    const open = await Promise.race([closed, new Promise((resolve) => setTimeout(resolve, 0, 'open'))]);
    assert.equal(open, 'open', 'the connection stays open');
  });

  it("a follower's delta above frameBytesMax reaches the leader as its full part, in parts", async () => {
    const { leader, base } = await leaderOf(() => leaderPart(10));
    let ownPart = [busyRuntime('f8-r1', 'f8', 10)];
    const { follower: f } = follower('f8', () => ownPart);
    const { conn, closed } = observeClose(await connectSync(base, 'f8', { payloadBytesMax: FRAME_BYTES_MAX }));
    f.attach(conn);
    await until(() => threadCount(leader.latestStates(), 'f8-r1') === 10, "the follower's first part");
    // 3,000 sessions open on the follower: some 250 KB of ops.
    ownPart = [busyRuntime('f8-r1', 'f8', 3000)];
    f.notifyChange();
    await until(() => threadCount(leader.latestStates(), 'f8-r1') === 3000, 'the change, committed');
    const open = await Promise.race([closed, new Promise((resolve) => setTimeout(resolve, 0, 'open'))]);
    assert.equal(open, 'open', 'the connection stays open');
  });

  it('each part frame stays within frameBytesMax, numbered from 0, closed by one commit-end', async () => {
    const { base } = await leaderOf(() => leaderPart());
    const ws = new WebSocket(`${base.replace('http', 'ws')}/api/sync/tap`, {
      perMessageDeflate: false,
      maxPayload: FRAME_BYTES_MAX,
      headers: { [SYNC_FEATURES_HEADER]: SYNC_FEATURES.parts },
    });
    closers.push(() => ws.terminate());
    const frames: string[] = [];
    ws.on('message', (data) => frames.push(data.toString()));
    await until(() => frames.some((f) => f.includes('"commit-end"')), 'a whole run');
    // An announce may come first, from a leader with no epoch yet.
    const first = frames.findIndex((f) => f.startsWith('{"type":"part"'));
    const run = frames.slice(first, frames.findIndex((f) => f.includes('"commit-end"')) + 1);
    const parsed = run.map((f) => JSON.parse(f) as { type: string; part?: number; parts?: number });
    assert.ok(run.length > 3, `${run.length} frames`);
    assert.ok(
      run.every((f) => Buffer.byteLength(f) <= FRAME_BYTES_MAX),
      'every frame within the limit',
    );
    assert.deepEqual(
      parsed.map((p) => p.type),
      [...Array.from({ length: run.length - 1 }, () => 'part'), 'commit-end'],
    );
    assert.deepEqual(
      parsed.slice(0, -1).map((p) => p.part),
      parsed.slice(0, -1).map((_, i) => i),
    );
    assert.equal(parsed.at(-1)!.parts, run.length - 1);
  });

  it('a peer that does not list the feature gets whole messages, and sends them', async () => {
    const { base, large } = await leaderOf(() => leaderPart());
    // As a follower of an earlier release dials: no features header, and no limit of this test.
    const ws = new WebSocket(`${base.replace('http', 'ws')}/api/sync/old`, { perMessageDeflate: false });
    closers.push(() => ws.terminate());
    const frames: string[] = [];
    ws.on('message', (data) => frames.push(data.toString()));
    await until(() => frames.some((f) => f.includes('"commit"')), 'the first commit');
    const commit = frames.find((f) => f.includes('"commit"'))!;
    const first = JSON.parse(commit) as { type: string; body: { kind: string } };
    assert.deepEqual([first.type, first.body.kind], ['commit', 'snapshot']);
    assert.ok(Buffer.byteLength(commit) > FRAME_BYTES_MAX, 'one frame above the limit, as before');
    assert.ok(!frames.some((f) => /"type":"(part|commit-end)"/.test(f)));
    await until(() => large.length > 0, "the leader's warning of the frame above the limit");

    // A leader of an earlier release lists no features: the follower's full part goes whole.
    const older = new WebSocketServer({ port: 0, host: '127.0.0.1' });
    closers.push(() => new Promise((resolve) => older.close(resolve)));
    await new Promise((resolve) => older.once('listening', resolve));
    const got: string[] = [];
    older.on('connection', (peer) => {
      peer.on('message', (data) => got.push(data.toString()));
      peer.send(JSON.stringify({ type: 'announce', term: 1, epoch: 1 }));
    });
    const { follower: f } = follower('f2', () => [busyRuntime('f2-r1', 'f2', 2500)]);
    f.attach(await connectSync(`http://127.0.0.1:${(older.address() as AddressInfo).port}`, 'f2'));
    await until(() => got.length > 0, 'the collect');
    const collect = JSON.parse(got[0]!) as { type: string; part: { kind: string; runtimes: RuntimeState[] } };
    assert.deepEqual([collect.type, collect.part.kind], ['collect', 'full']);
    assert.equal(collect.part.runtimes[0]!.threads.length, 2500);
  });

  it('a run cut mid-way leaves the previous epoch, and the next connection syncs', async () => {
    const { base } = await scriptedLeader([
      (ws) => {
        ws.send(snapshotFrame(1, EPOCH_1));
        for (const frame of EPOCH_2_PARTS) ws.send(frame);
        // The close frame follows the parts on the same stream: the follower has them all when it closes.
        ws.close(1001, 'cut mid-run');
      },
      (ws) => {
        for (const frame of [...EPOCH_2_PARTS, commitEndFrame(2, 2)]) ws.send(frame);
      },
    ]);
    const { follower: f, sink } = follower('f3');
    const first = observeClose(await connectSync(base, 'f3'));
    f.attach(first.conn);
    await first.closed;
    assert.deepEqual(
      sink.applied.map((a) => a.epoch),
      [1],
    );
    assert.equal(canonicalStates(sink.states), canonicalStates(EPOCH_1));
    f.attach(await connectSync(base, 'f3'));
    await until(() => sink.last?.epoch === 2, 'epoch 2');
    assert.equal(canonicalStates(sink.states), canonicalStates(EPOCH_2));
  });

  it("a run of a follower's part cut mid-way leaves its previous part with the leader", async () => {
    let own: RuntimeState[] = [];
    const { leader, base } = await leaderOf(() => own);
    const dial = async (): Promise<WebSocket> => {
      const ws = new WebSocket(`${base.replace('http', 'ws')}/api/sync/f4`, {
        perMessageDeflate: false,
        headers: { [SYNC_FEATURES_HEADER]: SYNC_FEATURES.parts },
      });
      closers.push(() => ws.terminate());
      await new Promise((resolve, reject) => ws.once('open', resolve).once('error', reject));
      return ws;
    };
    const before = runtimeState('f4-r1', 'f4', ['p1/t1']);
    const after = runtimeState('f4-r1', 'f4', ['p1/t1', 'p1/t2', 'p2/t3']);
    const parts = [
      JSON.stringify({ type: 'part', term: 1, epoch: 1, part: 0, runtimes: [{ ...after, threads: [] }] }),
      JSON.stringify({
        type: 'part',
        ...{ term: 1, epoch: 1, part: 1 },
        runtimes: [{ runtime: after.runtime, processes: [], threads: after.threads }],
      }),
    ];
    const end = JSON.stringify({ type: 'collect-end', term: 1, epoch: 1, replica: 'f4', version: 2, parts: 2 });

    const first = await dial();
    first.send(
      JSON.stringify({
        type: 'collect',
        term: 1,
        epoch: 1,
        replica: 'f4',
        version: 1,
        part: { kind: 'full', runtimes: [before] },
      }),
    );
    await until(() => threadCount(leader.latestStates(), 'f4-r1') === 1, 'the first part');
    // A close frame after the parts, on the same stream: the leader has them all when the connection ends.
    for (const frame of parts) first.send(frame);
    first.close(1000, 'cut mid-run');
    await new Promise((resolve) => first.once('close', resolve));
    own = [runtimeState('leader-r1', 'leader')];
    leader.notifyChange();
    await until(() => threadCount(leader.latestStates(), 'leader-r1') === 0, 'a later epoch');
    assert.equal(threadCount(leader.latestStates(), 'f4-r1'), 1, 'the part before the run');

    const second = await dial();
    for (const frame of [...parts, end]) second.send(frame);
    await until(() => threadCount(leader.latestStates(), 'f4-r1') === 3, 'the part sent in parts');
  });

  it('the term of a run is fenced like that of one message', async () => {
    const { base, got } = await scriptedLeader([
      (ws) => {
        for (const frame of [...EPOCH_2_PARTS, commitEndFrame(2, 2)]) ws.send(frame);
      },
    ]);
    const { follower: f, sink } = follower('f5');
    f.adopt({ epoch: 7, term: 2 }, []);
    f.attach(await connectSync(base, 'f5'));
    await until(() => got.length > 0, 'the refusal');
    const error = JSON.parse(got[0]!) as { type: string; term: number; epoch: number; latestEpoch: number };
    assert.deepEqual(error, { ...error, type: 'error', term: 2, epoch: 2, latestEpoch: 7 });
    assert.equal(sink.applied.length, 0);
  });

  const outOfOrder: Array<{ name: string; frames: string[]; reason: RegExp }> = [
    { name: 'a run that starts at part 1', frames: [EPOCH_2_PARTS[1]!], reason: /part 1 where part 0/ },
    {
      name: 'a part skipped',
      frames: [EPOCH_2_PARTS[0]!, partFrame(2, 2, [B])],
      reason: /part 2 where part 1/,
    },
    {
      name: 'a message within the run',
      frames: [EPOCH_2_PARTS[0]!, JSON.stringify({ type: 'announce', term: 1, epoch: 2 }), EPOCH_2_PARTS[1]!],
      reason: /announce within a run of parts/,
    },
    {
      name: 'parts of two runs',
      frames: [EPOCH_2_PARTS[0]!, partFrame(3, 1, [B]), commitEndFrame(3, 2)],
      reason: /epoch 3 within the run of term 1 epoch 2/,
    },
    {
      name: 'an end counting other parts',
      frames: [...EPOCH_2_PARTS, commitEndFrame(2, 3)],
      reason: /3 parts announced, 2 came/,
    },
    { name: 'an end without parts', frames: [commitEndFrame(2, 1)], reason: /no part before/ },
    {
      name: 'a runtime listed again after another',
      frames: [partFrame(2, 0, [A, B]), partFrame(2, 1, [A]), commitEndFrame(2, 2)],
      reason: /runtime a again/,
    },
  ];
  for (const { name, frames, reason } of outOfOrder) {
    it(`${name} is refused: the connection closes with 1008, the previous epoch stands`, async () => {
      const { base } = await scriptedLeader([
        (ws) => {
          ws.send(snapshotFrame(1, EPOCH_1));
          for (const frame of frames) ws.send(frame);
        },
      ]);
      const { follower: f, sink } = follower('f6');
      const { conn, closed } = observeClose(await connectSync(base, 'f6'));
      f.attach(conn);
      const [code, why] = await closed;
      assert.equal(code, 1008);
      assert.match(why, reason);
      assert.deepEqual(
        sink.applied.map((a) => a.epoch),
        [1],
      );
    });
  }
});
