// Fuzz: WebSocket frames to /api/sync/:replica of the leader and of a
// follower — sync-shaped messages with mutated fields (parts of runs and
// their ends too), arbitrary JSON and arbitrary bytes. Property: every frame
// is either handled or answered by closing that connection; the process
// survives, the real follower keeps its sync (epochs keep advancing on both
// replicas, terms never go down) and the runtime stays available.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { WebSocket } from 'ws';
import { SYNC_REGRESSIONS, type SyncCase } from './regressions.ts';
import { FUZZ_SEED, TOKEN, describeFailures, runCases, startFuzzCluster, type FuzzCluster } from './support.ts';
import { until } from '../support/processes.ts';
import { openSession } from '../cluster/mcp.ts';

const CASES = 10_000;
const PARALLEL = 16;

const num = fc.oneof(
  fc.nat(10),
  fc.integer(),
  fc.constantFrom(-1, 1.5, 2 ** 53, Number.MAX_SAFE_INTEGER),
  fc.constant('1' as unknown as number),
);
const ident = fc.oneof(fc.constantFrom('s0', 's1', 'r0', 'fz'), fc.string({ maxLength: 12 }));
const runtime = fc.record({
  id: ident,
  classes: fc.array(ident, { maxLength: 3 }),
  metadata: fc.dictionary(fc.string({ maxLength: 6 }), fc.string({ maxLength: 6 }), { maxKeys: 3 }),
  version: fc.string({ maxLength: 8 }),
  idleWeight: fc.dictionary(fc.constantFrom('sandboxes', 'x'), fc.oneof(fc.nat(100), fc.double()), { maxKeys: 2 }),
  available: fc.boolean(),
  owner: ident,
  generation: num,
});
const state = fc.record({ runtime, processes: fc.array(ident, { maxLength: 3 }), threads: fc.constant([]) });
const clusterOp = fc.oneof(
  fc.record({ op: fc.constant('runtime.upsert'), runtime }),
  fc.record({ op: fc.constantFrom('runtime.remove', 'runtime.available'), runtimeId: ident, available: fc.boolean() }),
  fc.record({ op: fc.constantFrom('process.add', 'process.remove'), runtimeId: ident, process: ident }),
  fc.record({ op: fc.constantFrom('thread.add', 'bogus'), runtimeId: ident, process: ident, thread: ident }),
);
const part = fc.oneof(
  fc.record({ kind: fc.constant('full'), runtimes: fc.array(state, { maxLength: 3 }) }),
  fc.record({ kind: fc.constant('delta'), base: num, ops: fc.array(clusterOp, { maxLength: 4 }) }),
);
const message = fc.oneof(
  fc.record({ type: fc.constant('announce'), term: num, epoch: num }),
  fc.record({ type: fc.constant('collect'), term: num, epoch: num, replica: ident, version: num, part }),
  fc.record({
    type: fc.constant('commit'),
    term: num,
    epoch: num,
    body: fc.oneof(
      fc.record({ kind: fc.constant('delta'), baseEpoch: num, ops: fc.array(clusterOp, { maxLength: 4 }) }),
      fc.record({
        kind: fc.constant('snapshot'),
        snapshot: fc.record({ epoch: num, term: num, runtimes: fc.array(state, { maxLength: 2 }) }),
      }),
    ),
  }),
  fc.record({ type: fc.constant('error'), term: num, epoch: num, reason: fc.string({ maxLength: 40 }) }),
  fc.record({ type: fc.constant('resync'), term: num, what: fc.constantFrom('snapshot', 'part', 'x') }),
  // Runs of parts: small part numbers, so some follow one another on a pooled connection.
  fc.record({
    type: fc.constant('part'),
    term: num,
    epoch: num,
    part: fc.oneof(fc.nat(2), num),
    runtimes: fc.array(state, { maxLength: 2 }),
  }),
  fc.record({ type: fc.constant('commit-end'), term: num, epoch: num, parts: fc.oneof(fc.nat(3), num) }),
  fc.record({
    type: fc.constant('collect-end'),
    term: num,
    epoch: num,
    replica: ident,
    version: num,
    parts: fc.oneof(fc.nat(3), num),
  }),
);

const caseArb: fc.Arbitrary<SyncCase> = fc.record({
  // Fuzz connections never take a real replica's name, which would (by design) replace its connection.
  replica: fc.oneof(
    { weight: 9, arbitrary: fc.constantFrom('fz0', 'fz1', 'fz2', 'fz3') },
    { weight: 1, arbitrary: fc.string({ maxLength: 20 }).map((s) => encodeURIComponent(`fz${s}`)) },
  ),
  frame: fc.oneof(
    { weight: 6, arbitrary: message.map((m) => JSON.stringify(m)) },
    { weight: 2, arbitrary: fc.json({ maxDepth: 3 }) },
    { weight: 1, arbitrary: fc.string({ maxLength: 100 }) },
  ),
});
const bytesArb: fc.Arbitrary<SyncCase> = fc
  .uint8Array({ maxLength: 200 })
  .map((b) => ({ replica: 'fz9', frame: Buffer.from(b).toString('base64'), binary: true }));

/** Opens a sync connection; resolves undefined when the upgrade is refused with a 4xx. */
async function open(url: string, replica: string): Promise<WebSocket | undefined> {
  // With the cluster's token: the frames, not the credentials, are under fuzz.
  const ws = new WebSocket(`${url.replace('http', 'ws')}/api/sync/${replica}`, {
    perMessageDeflate: false,
    headers: { authorization: `Bearer ${TOKEN}` },
  });
  return new Promise((resolve, reject) => {
    ws.once('open', () => resolve(ws));
    ws.once('unexpected-response', (_req, res) => {
      res.resume();
      ws.terminate();
      if ((res.statusCode ?? 500) < 500) resolve(undefined);
      else reject(new Error(`upgrade answered ${res.statusCode}`));
    });
    ws.once('error', () => resolve(undefined));
  });
}

/**
 * Sends one frame, then a ping: the pong (or a close) proves the frame was
 * processed. A connection the server kept open is reused for the next case.
 */
async function sendFrame(url: string, c: SyncCase, pool: Map<string, WebSocket>): Promise<string | undefined> {
  const key = `${url}/${c.replica}`;
  let ws = pool.get(key);
  if (!ws || ws.readyState !== WebSocket.OPEN) {
    pool.delete(key);
    ws = await open(url, c.replica);
    if (!ws) return undefined;
  }
  pool.set(key, ws);
  const socket = ws;
  socket.send(c.binary ? Buffer.from(c.frame, 'base64') : c.frame, { binary: c.binary === true });
  socket.ping();
  await new Promise<void>((resolve, reject) => {
    const done = (): void => {
      clearTimeout(timer);
      socket.off('pong', done);
      socket.off('close', done);
      resolve();
    };
    const timer = setTimeout(() => reject(new Error('no pong and no close within 5 s')), 5000);
    socket.on('pong', done);
    socket.on('close', done);
  });
  if (socket.readyState !== WebSocket.OPEN) pool.delete(key);
  return undefined;
}

function closeAll(pool: Map<string, WebSocket>): void {
  for (const ws of pool.values()) ws.terminate();
  pool.clear();
}

describe('fuzz: epoch sync frames', () => {
  let cluster: FuzzCluster;
  before(async () => {
    cluster = await startFuzzCluster(2);
  });
  after(() => cluster?.close());

  for (const { note, input } of SYNC_REGRESSIONS) {
    it(`regression: survives ${note}`, async () => {
      const pool = new Map<string, WebSocket>();
      for (const r of cluster.replicas) assert.equal(await sendFrame(r.url, input, pool), undefined);
      closeAll(pool);
      await cluster.assertHealthy();
    });
  }

  it(`survives ${CASES} arbitrary frames and keeps the real follower in sync`, async () => {
    const before = await Promise.all([cluster.epoch(0), cluster.epoch(1)]);
    const cases = [
      ...fc.sample(caseArb, { numRuns: CASES * 0.8, seed: FUZZ_SEED }),
      ...fc.sample(bytesArb, { numRuns: CASES * 0.2, seed: FUZZ_SEED }),
    ];
    const started = performance.now();
    // Both replicas: the leader's sync server and a follower's (which must refuse or ignore).
    // Each worker owns its connections, so two cases never wait on one socket.
    let n = 0;
    const pools = Array.from({ length: PARALLEL }, () => new Map<string, WebSocket>());
    const failures = await runCases(cases, PARALLEL, (c, worker) =>
      sendFrame(cluster.replicas[n++ % 2]!.url, c, pools[worker]!),
    );
    for (const pool of pools) closeAll(pool);
    console.log(`fuzz sync: ${cases.length} frames in ${((performance.now() - started) / 1000).toFixed(1)} s`);
    assert.equal(failures.length, 0, describeFailures(failures));
    await cluster.assertHealthy();
    // A change after the fuzz (a new sandbox on r0) still reaches both replicas as a new epoch.
    await openSession({ scheduler: cluster.replicas[1]!.url, runtime: 'r0', process: 'after-fuzz' });
    await until('a new epoch on both replicas', async () => {
      const now = await Promise.all([cluster.epoch(0), cluster.epoch(1)]);
      return now.every((e, i) => (e.epoch ?? -1) > (before[i]!.epoch ?? -1)) || undefined;
    });
    const after = await Promise.all([cluster.epoch(0), cluster.epoch(1)]);
    for (let i = 0; i < 2; i++) assert.ok(after[i]!.term >= before[i]!.term, `s${i} term went down`);
    assert.equal(after.filter((e) => e.isLeader).length, 1, 'exactly one leader');
  });
});
