import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { WebSocket, WebSocketServer } from 'ws';
import { systemClock } from '@switchyard/clock';
import { SwitchyardError } from '@switchyard/protocol';
import type { RuntimeState } from '@switchyard/protocol';
import { EpochLeader, connectSync, createSyncServer } from '@switchyard/epoch';
import type { SyncServer, EpochFollower } from '@switchyard/epoch';
import { referenceApply, referenceDiff, referenceMerge } from '@switchyard/epoch/testing';
import type { RecordingSink } from './support/cluster.ts';
import { recordingFollower, runtimeState } from './support/cluster.ts';
import { serveLeader } from './support/serve-leader.ts';
import { pollUntil } from './support/until.ts';

const until = (check: () => boolean, what: string, timeoutMs = 3000): Promise<void> =>
  pollUntil(check, what, timeoutMs);

const PEER_TOKEN = 'peer-token-0123456789';

function rawClient(url: string): Promise<WebSocket> {
  const ws = new WebSocket(url, { headers: { authorization: `Bearer ${PEER_TOKEN}` } });
  return new Promise((resolve, reject) => {
    ws.once('open', () => resolve(ws));
    ws.once('error', reject);
  });
}

describe('epoch sync over WebSocket', () => {
  let http: Server;
  let sync: SyncServer;
  let leader: EpochLeader;
  let base: string;
  let leaderPart = [runtimeState('leader-r1', 'leader', ['p1/t1'])];
  const followers: EpochFollower[] = [];

  before(async () => {
    leader = new EpochLeader({
      replicaId: 'leader',
      term: 1,
      clock: systemClock,
      localPart: () => leaderPart,
      merge: referenceMerge,
      diff: referenceDiff,
      apply: referenceApply,
      cycleIntervalMs: 100,
      debounceMs: 5,
    });
    sync = createSyncServer({
      onConnection: (conn, replica) => leader.attach(conn, replica),
      authorize: (req) => req.headers.authorization === `Bearer ${PEER_TOKEN}`,
    });
    http = createServer((_req, res) => res.writeHead(404).end());
    http.on('upgrade', (req, socket, head) => {
      if (!sync.handleUpgrade(req, socket, head)) socket.end('HTTP/1.1 404 Not Found\r\n\r\n');
    });
    await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', resolve));
    base = `http://127.0.0.1:${(http.address() as AddressInfo).port}`;
  });

  after(async () => {
    for (const f of followers) f.stop();
    leader.stop();
    sync.close();
    sync.close();
    http.closeAllConnections();
    await new Promise((resolve) => http.close(resolve));
  });

  async function follower(replica: string): Promise<{ follower: EpochFollower; sink: RecordingSink }> {
    const made = recordingFollower(replica, () => [runtimeState(`${replica}-r1`, replica)]);
    followers.push(made.follower);
    made.follower.attach(await connectSync(base, replica, { headers: { authorization: `Bearer ${PEER_TOKEN}` } }));
    return made;
  }

  it('a follower gets the first epoch as a snapshot and later changes as deltas', async () => {
    const { sink } = await follower('w1');
    await until(() => sink.states.some((s) => s.runtime.id === 'w1-r1'), 'its own runtime committed');
    leaderPart = [runtimeState('leader-r1', 'leader', ['p1/t1', 'p1/t2'])];
    leader.notifyChange();
    await until(() => sink.states.some((s) => s.threads.some((t) => t.thread === 't2')), 'the change');
    assert.equal(sink.applied[0]!.kind, 'snapshot');
    assert.equal(sink.last!.kind, 'delta');
    assert.equal(sink.last!.epoch, leader.latest()!.epoch);
  });

  const malformed = [
    { name: 'a frame that is not JSON', frame: '{"type":', reason: /not JSON/ },
    {
      name: 'a message with an unknown type',
      frame: '{"type":"hello","term":1}',
      reason: /invalid sync message: type/,
    },
    {
      name: 'a collect with a bad replica id',
      frame: JSON.stringify({
        type: 'collect',
        term: 1,
        epoch: 1,
        replica: 'no spaces',
        version: 1,
        part: { kind: 'full', runtimes: [] },
      }),
      reason: /replica/,
    },
    { name: 'an announce with a negative term', frame: '{"type":"announce","term":-1,"epoch":0}', reason: /term/ },
  ];
  for (const { name, frame, reason } of malformed) {
    it(`${name} closes that connection with 1008 and a reason naming it; others are unaffected`, async () => {
      const { sink } = await follower(`ok-${followers.length}`);
      await until(() => sink.applied.length > 0, 'the healthy follower synced');
      const bad = await rawClient(`${base.replace('http', 'ws')}/api/sync/bad`);
      const closed = new Promise<[number, string]>((resolve) =>
        bad.once('close', (code, why) => resolve([code, why.toString()])),
      );
      bad.send(frame);
      const [code, why] = await closed;
      assert.equal(code, 1008);
      assert.match(why, reason);
      const seen = sink.last!.epoch;
      leaderPart = [runtimeState('leader-r1', 'leader', ['p1/t1', `p1/${name.length}-${followers.length}`])];
      leader.notifyChange();
      await until(() => sink.last!.epoch > seen, 'a later commit on the healthy connection');
    });
  }

  it('refuses a peer without the token before the upgrade', async () => {
    for (const headers of [{}, { authorization: 'Bearer wrong' }] as Array<Record<string, string>>) {
      await assert.rejects(connectSync(base, 'intruder', { headers }), /HTTP 401/);
    }
  });

  it('connectSync rejects with upstream_unavailable when the replica id is refused', async () => {
    const raw = new WebSocket(`${base.replace('http', 'ws')}/api/sync/${encodeURIComponent('bad id')}`);
    const status = await new Promise<number>((resolve) => {
      raw.once('unexpected-response', (_req, res) => resolve(res.statusCode ?? 0));
      raw.once('error', () => resolve(-1));
    });
    raw.terminate();
    assert.equal(status, 400);
    await assert.rejects(connectSync(`${base}/nope`, 'w9'), (e: unknown) => {
      return e instanceof SwitchyardError && e.code === 'upstream_unavailable' && /404/.test(e.message);
    });
    await assert.rejects(
      connectSync(base, 'bad id'),
      (e: unknown) => e instanceof SwitchyardError && e.code === 'bad_identity',
    );
  });
});

describe('sync server upgrade routing', () => {
  it('an upgrade whose request target is not a parsable URL is not taken, and throws nothing', () => {
    const sync = createSyncServer({ onConnection: () => assert.fail('no connection expected') });
    const socket = { end: () => assert.fail('the socket is not the sync server’s to answer') };
    try {
      for (const url of ['//[', 'http://[/api/sync/x', '//a%zz/api/sync/x']) {
        const req = { url, headers: {} } as unknown as Parameters<SyncServer['handleUpgrade']>[0];
        assert.equal(
          sync.handleUpgrade(req, socket as unknown as Parameters<SyncServer['handleUpgrade']>[1], Buffer.alloc(0)),
          false,
          url,
        );
      }
    } finally {
      sync.close();
    }
  });
});

describe("a follower's refusal over WebSocket", () => {
  const closers: Array<() => Promise<unknown> | void> = [];
  after(async () => {
    for (const close of closers.reverse()) await close();
  });

  /** A follower fenced at term 2 that holds epoch 7, attached to the leader at `base`. */
  async function fencedFollower(base: string): Promise<RecordingSink> {
    const { follower: f, sink } = recordingFollower('fenced', () => []);
    closers.push(() => f.stop());
    f.adopt({ epoch: 7, term: 2 }, []);
    f.attach(await connectSync(base, 'fenced', { headers: { authorization: `Bearer ${PEER_TOKEN}` } }));
    return sink;
  }

  /** An EpochLeader of this version at `term`, its first epoch `startEpoch + 1`, behind a sync server; its base URL. */
  async function leaderAt(
    term: number,
    errors: Array<{ term: number; latestEpoch?: number }>,
    { startEpoch = 0, part = [] as RuntimeState[] } = {},
  ): Promise<string> {
    const leader = new EpochLeader({
      replicaId: 'leader',
      term,
      startEpoch,
      clock: systemClock,
      localPart: () => part,
      merge: referenceMerge,
      diff: referenceDiff,
      apply: referenceApply,
      cycleIntervalMs: 50,
      debounceMs: 5,
      onFollowerError: (_replica, followerTerm, _reason, latestEpoch) =>
        errors.push({ term: followerTerm, ...(latestEpoch === undefined ? {} : { latestEpoch }) }),
    });
    return serveLeader(leader, closers);
  }

  /**
   * A leader of the version before `latestEpoch`: its upgrade answer lists no sync features. It sends `first`
   * and records what the follower sends back.
   */
  async function olderLeader(first: object): Promise<{ base: string; frames: string[] }> {
    const older = new WebSocketServer({ port: 0, host: '127.0.0.1' });
    closers.push(() => new Promise((resolve) => older.close(resolve)));
    await new Promise((resolve) => older.once('listening', resolve));
    const frames: string[] = [];
    older.on('connection', (ws) => {
      ws.on('message', (data) => frames.push(data.toString()));
      ws.send(JSON.stringify(first));
    });
    return { base: `http://127.0.0.1:${(older.address() as AddressInfo).port}`, frames };
  }

  it('tells a leader of this version the latest epoch it holds', async () => {
    const errors: Array<{ term: number; latestEpoch?: number }> = [];
    await fencedFollower(await leaderAt(1, errors));
    await until(() => errors.length > 0, 'the refusal');
    assert.deepEqual(errors[0], { term: 2, latestEpoch: 7 });
  });

  it('refuses the whole of a higher term numbered below its epoch, from a leader of this version', async () => {
    const errors: Array<{ term: number; latestEpoch?: number }> = [];
    const sink = await fencedFollower(await leaderAt(3, errors));
    await until(() => errors.length > 0, 'the refusal');
    // Term 4 is above the leader's: it leads again above it, and above epoch 7.
    assert.deepEqual(errors[0], { term: 4, latestEpoch: 7 });
    assert.equal(sink.applied.length, 0, 'epoch 1 of term 3 never reached the sink');
  });

  it('refuses a higher term at its own epoch number with other content, from a leader of this version', async () => {
    const errors: Array<{ term: number; latestEpoch?: number }> = [];
    const part = [runtimeState('leader-r1', 'leader')];
    const sink = await fencedFollower(await leaderAt(3, errors, { startEpoch: 6, part }));
    await until(() => errors.length > 0, 'the refusal');
    assert.deepEqual(errors[0], { term: 4, latestEpoch: 7 });
    assert.equal(sink.applied.length, 0, 'epoch 7 keeps the content it had here');
  });

  it('leaves the field out for a leader that does not advertise it (one of an older version would close on it)', async () => {
    const { base, frames } = await olderLeader({ type: 'announce', term: 1, epoch: 3 });
    await fencedFollower(base);
    await until(() => frames.length > 0, 'the refusal');
    const error = JSON.parse(frames[0]!) as Record<string, unknown>;
    assert.equal(error.type, 'error');
    assert.deepEqual(Object.keys(error).sort(), ['epoch', 'reason', 'term', 'type']);
    assert.equal(error.term, 2);
  });

  it('follows a higher term numbered below its epoch from a leader that does not advertise it, as before', async () => {
    // Refused, a leader of an earlier version would lead again numbering from its own epoch, and be refused again.
    const snapshot = { epoch: 2, term: 3, runtimes: [] };
    const { base } = await olderLeader({ type: 'commit', term: 3, epoch: 2, body: { kind: 'snapshot', snapshot } });
    const sink = await fencedFollower(base);
    await until(() => sink.applied.length > 0, 'the commit');
    assert.deepEqual(sink.last && { epoch: sink.last.epoch, kind: sink.last.kind }, { epoch: 2, kind: 'snapshot' });
  });
});
