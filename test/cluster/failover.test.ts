// Acceptance: leader failover of a four-replica scheduler cluster as OS
// processes (settings scaled down: lease 3 s, renew 2 s, retry 0.5 s, jitter
// factor 0.5 instead of client-go's 1.2 — see the kill -9 bound). The
// replicas elect through a FAKE Kubernetes Lease API (test/fakes) served by
// this test process and reached through the real @kubernetes/client-node: no
// API server can run here, and the fake keeps the behaviours election relies
// on. Four replicas, each holding one runtime, so that after a graceful stop
// and a kill -9 two followers remain, one of them for the fencing check.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { WebSocketServer } from 'ws';
import type { TestCluster } from '../support/cluster.ts';
import type { AppProcess } from '../support/processes.ts';
import type { FakeLeaseApi } from '../fakes/lease-api.ts';
import { firstRegression, getEpoch, isAlive, sampleEpochs, schedule, startLeaseCluster } from './helpers.ts';

const ELECTION = { leaseDurationMs: 3000, renewDeadlineMs: 2000, retryPeriodMs: 500, jitterFactor: 0.5 };
const LEASE = ['default', 'switchyard-scheduler'] as const;

describe('scheduler leader failover on the fake Lease API', () => {
  let cluster: TestCluster;
  let fake: FakeLeaseApi;
  let close: () => Promise<void>;
  before(async () => {
    ({ cluster, fake, close } = await startLeaseCluster({
      schedulers: 4,
      runtimes: 4,
      gateways: 0,
      election: ELECTION,
    }));
  });
  after(() => close?.());

  const survivors = (): AppProcess[] => cluster.schedulers.filter(isAlive);

  /** Time from `act` to the first commit of a term above `term` seen on any survivor, sampled every 20 ms. */
  async function timeToNextTerm(term: number, act: () => void): Promise<number> {
    const urls = survivors().map((s) => s.url!);
    const started = performance.now();
    act();
    for (;;) {
      const infos = await Promise.all(urls.map((u) => getEpoch(u, 500).catch(() => undefined)));
      if (infos.some((i) => i && i.term > term && i.epoch !== null)) return performance.now() - started;
      assert.ok(performance.now() - started < 15_000, 'no commit of a new term within 15 s');
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  }

  it('hands over within about one retry period when the leader stops gracefully (SIGTERM)', async () => {
    const leader = await cluster.leader();
    const { term } = await getEpoch(leader.url!);
    const elapsedMs = await timeToNextTerm(term, () => leader.signal('SIGTERM'));
    await leader.exited;
    console.log(
      `# SIGTERM of ${leader.name} (term ${term}): next term's first commit after ${elapsedMs.toFixed(0)} ms`,
    );
    // The released lease is taken on the next retry tick; the new leader commits at once.
    assert.ok(elapsedMs < 2 * ELECTION.retryPeriodMs + 500, `${elapsedMs} ms`);
  });

  it('commits a higher term within leaseDuration + 2 retry periods of a kill -9, serving every schedule meanwhile, with no regression', async () => {
    const leader = await cluster.leader();
    const { term } = await getEpoch(leader.url!);
    const followers = survivors().filter((s) => s !== leader);
    const sampler = sampleEpochs(followers.map((s) => s.url!));
    const statuses = new Map<number, number>();
    let load = true;
    let sent = 0;
    const loops = Array.from({ length: 4 }, async (_, worker) => {
      for (let i = 0; load && i < 100_000; i++) {
        const url = followers[(worker + i) % followers.length]!.url!;
        const answer = await schedule(url, { class: 'demo', processId: `kill9-${worker}-${i}` }).catch(() => ({
          status: 0,
          body: {},
        }));
        statuses.set(answer.status, (statuses.get(answer.status) ?? 0) + 1);
        sent++;
      }
    });
    const killedAt = Date.now();
    const elapsedMs = await timeToNextTerm(term, () => leader.signal('SIGKILL'));
    // When the new holder took the lease (its clock is this machine's): the rest is the first commit.
    const acquireTime = (fake.lease(...LEASE) as { spec: { acquireTime?: string } } | undefined)?.spec.acquireTime;
    const takenMs = acquireTime ? Date.parse(acquireTime) - killedAt : NaN;
    // Keep the load on a little past the commit, then stop it.
    await new Promise((resolve) => setTimeout(resolve, 500));
    load = false;
    await Promise.all(loops);
    const samples = await sampler.stop();
    console.log(
      `# kill -9 of ${leader.name} (term ${term}): lease taken after ${takenMs.toFixed(0)} ms, ` +
        `next term's first commit after ${elapsedMs.toFixed(0)} ms; ` +
        `${sent} schedules meanwhile ${JSON.stringify(Object.fromEntries(statuses))}; ${samples.length} epoch samples`,
    );
    // A candidate judges expiry from when it saw the lease last change, which is at most one jittered poll,
    // retryPeriod x (1 + jitterFactor), after the final renewal; it tries again the moment that expiry comes.
    // So the worst case is leaseDuration + 1.5 retry periods here, plus the first commit: within the bound
    // leaseDuration + 2 retry periods (4 s).
    const boundMs = ELECTION.leaseDurationMs + 2 * ELECTION.retryPeriodMs;
    assert.ok(elapsedMs <= boundMs, `${elapsedMs} ms > ${boundMs} ms (lease taken after ${takenMs} ms)`);
    assert.deepEqual([...statuses.keys()], [200], 'every schedule on a survivor succeeded');
    assert.ok(sent > 20, `${sent} schedules sent during the failover`);
    assert.equal(firstRegression(samples), undefined);
  });

  it('fences off commits of the old term from a stale leader the lease points a follower at', async () => {
    const leader = await cluster.leader();
    const follower = survivors().find((s) => s !== leader)!;
    // The current term is the lease's; the follower may still be catching up with it after the kill -9 above
    // (it learns of the new leader at its next lease poll). A term below the one it holds is what it fences off.
    const { leaseTransitions: term } = (fake.lease(...LEASE) as { spec: { leaseTransitions: number } }).spec;
    const catchUpStarted = performance.now();
    await until(async () => ((await getEpoch(follower.url!)).term === term ? true : undefined), 10_000);
    console.log(
      `# ${follower.name} committed term ${term} ${performance.now() - catchUpStarted} ms into the fencing check`,
    );
    const before = await getEpoch(follower.url!);
    assert.ok(before.epoch !== null);
    const staleTerm = term - 1;
    const bogusEpoch = before.epoch + 1000;
    const ghost = await startStaleLeader(staleTerm, bogusEpoch);
    const sampler = sampleEpochs([follower.url!]);
    try {
      // Point the lease at the stale leader, keeping the current term: the
      // follower dials it as it would a lagging old leader after a partition.
      await pointLeaseAt(ghost.url);
      const fenced = await follower
        .waitForLog((l) => l.msg === 'sync message fenced off', 8000)
        .catch((error) => {
          // What each live replica did meanwhile, for a failure that cannot be rerun at will.
          for (const s of survivors()) console.log(`# ${s.name}${s === leader ? ' (leader)' : ''}: ${recent(s)}`);
          throw error;
        });
      assert.equal(fenced.term, staleTerm);
      assert.ok(ghost.connections() >= 1, 'the follower dialled the stale leader');
      const during = await getEpoch(follower.url!);
      assert.ok(during.epoch !== null && during.epoch < bogusEpoch, `epoch ${during.epoch} came from the stale leader`);
      assert.ok(during.term >= before.term, `term went from ${before.term} to ${during.term}`);
      assert.ok(during.epoch >= before.epoch);
      // The stale holder never renews: a live replica takes the lease with a higher term.
      await until(async () => ((await getEpoch(follower.url!)).term > before.term ? true : undefined), 10_000);
      const runtimes = (await (await fetch(`${follower.url}/api/runtimes`)).json()) as { runtimes: unknown[] };
      assert.ok(runtimes.runtimes.length > 0, 'the follower still lists runtimes');
    } finally {
      const samples = await sampler.stop();
      await ghost.close();
      assert.equal(firstRegression(samples), undefined);
    }
  });

  it('warns, naming the fault, when the leader it follows breaks the sync protocol, and recovers', async () => {
    const leader = await cluster.leader();
    const follower = survivors().find((s) => s !== leader)!;
    const { term } = await getEpoch(follower.url!);
    // No leader has term -1: every message of this one is malformed.
    const ghost = await startStaleLeader(-1, 1);
    try {
      await pointLeaseAt(ghost.url);
      const closed = await follower.waitForLog(
        (l) => l.msg === 'sync connection to the leader closed' && l.leader === ghost.url,
        8000,
      );
      assert.equal(closed.level, 40, 'logged as a warning');
      assert.equal(closed.code, 1008);
      assert.match(String(closed.reason), /^invalid sync message: term/);
      // The malformed holder never renews: a live replica takes the lease with a higher term.
      await until(async () => ((await getEpoch(follower.url!)).term > term ? true : undefined), 10_000);
    } finally {
      await ghost.close();
    }
  });

  it('warns that it cannot reach a leader the lease names but nobody serves, and recovers', async () => {
    const leader = await cluster.leader();
    const follower = survivors().find((s) => s !== leader)!;
    const { term } = await getEpoch(follower.url!);
    const gone = await closedPortUrl();
    await pointLeaseAt(gone);
    const failed = await follower.waitForLog(
      (l) => l.msg === 'cannot reach the leader; trying again' && l.leader === gone,
      8000,
    );
    assert.equal(failed.level, 40, 'logged as a warning');
    assert.equal(failed.failures, 1);
    assert.match(String(failed.err), /ECONNREFUSED/);
    // Nobody renews that lease: a live replica takes it with a higher term.
    await until(async () => ((await getEpoch(follower.url!)).term > term ? true : undefined), 10_000);
  });

  /** Makes `url` the lease holder, keeping the current term, as a stale or faulty leader would appear. */
  async function pointLeaseAt(url: string): Promise<void> {
    const lease = fake.lease(...LEASE) as { metadata: { resourceVersion: string }; spec: Record<string, unknown> };
    const now = microTime(new Date());
    const res = await fetch(`${fake.url}/apis/coordination.k8s.io/v1/namespaces/default/leases/${LEASE[1]}`, {
      method: 'PUT',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        ...lease,
        spec: { ...lease.spec, holderIdentity: `ghost@${url}`, acquireTime: now, renewTime: now },
      }),
    });
    assert.equal(res.status, 200, await res.text());
  }
});

/** The replica's last log lines, one short entry each. */
function recent(replica: AppProcess): string {
  const entries = replica.logs.slice(-15).map((l) => {
    const { time, msg, term, leader, reason, code } = l as Record<string, unknown>;
    return JSON.stringify({ time, msg, term, leader, reason, code });
  });
  return entries.join(' ');
}

/** The URL of a loopback port that was just free and now has no listener. */
async function closedPortUrl(): Promise<string> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return `http://127.0.0.1:${port}`;
}

/** Six fractional digits, as a Kubernetes MicroTime must have. */
function microTime(date: Date): string {
  return date.toISOString().replace('Z', '000Z');
}

async function until(probe: () => Promise<true | undefined>, timeoutMs: number): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  while (!(await probe().catch(() => undefined))) {
    assert.ok(performance.now() < deadline, `condition not met within ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/**
 * A sync endpoint impersonating a leader of `term`: to every follower that
 * dials it, it announces and commits an empty snapshot at `epoch`.
 */
async function startStaleLeader(term: number, epoch: number) {
  const server: Server = createServer((_req, res) => res.writeHead(404).end());
  const wss = new WebSocketServer({ noServer: true, perMessageDeflate: false });
  let connections = 0;
  server.on('upgrade', (req, socket, head) => {
    wss.handleUpgrade(req, socket, head, (ws) => {
      connections++;
      ws.on('error', () => {});
      ws.send(JSON.stringify({ type: 'announce', term, epoch }));
      ws.send(
        JSON.stringify({
          type: 'commit',
          term,
          epoch,
          body: { kind: 'snapshot', snapshot: { epoch, term, runtimes: [] } },
        }),
      );
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    connections: () => connections,
    async close() {
      for (const ws of wss.clients) ws.terminate();
      wss.close();
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}
