// Acceptance: a three-replica scheduler cluster as OS processes on loopback.
// The replicas elect through a FAKE Kubernetes Lease API (test/fakes) served
// by this test process, reached through the real @kubernetes/client-node:
// no API server can run here (no Kubernetes, no Docker), and the fake keeps
// the behaviours election depends on (resourceVersion conflicts, MicroTime).
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { WebSocket } from 'ws';
import type { TestCluster } from '../support/cluster.ts';
import type { FakeLeaseApi } from '../fakes/lease-api.ts';
import { getEpoch, idStream, schedule, startLeaseCluster, type EpochInfo } from './helpers.ts';
import { openSession } from './mcp.ts';

const REQUESTS = 1000;
const CONCURRENCY = 16;

describe('scheduler cluster of three processes on the fake Lease API', () => {
  let cluster: TestCluster;
  let fake: FakeLeaseApi;
  let close: () => Promise<void>;
  let urls: string[];
  before(async () => {
    ({ cluster, fake, close } = await startLeaseCluster({ schedulers: 3, runtimes: 2, gateways: 0 }));
    urls = cluster.schedulerUrls();
  });
  after(() => close?.());

  it('has exactly one leader, which holds the Lease and is the leader every replica names', async () => {
    const leader = await cluster.leader();
    const infos = await Promise.all(urls.map((u) => getEpoch(u)));
    assert.deepEqual(
      infos.filter((i) => i.isLeader).map((i) => i.replica),
      [leader.name],
    );
    for (const info of infos) assert.equal(info.leader?.id, leader.name, `${info.replica} names the leader`);
    const lease = fake.lease('default', 'switchyard-scheduler') as { spec: { holderIdentity: string } };
    assert.ok(lease.spec.holderIdentity.startsWith(`${leader.name}@`), lease.spec.holderIdentity);
  });

  it('serves a new commit on every replica within 1 s of the first replica showing it', async () => {
    const before = Math.max(...(await Promise.all(urls.map((u) => getEpoch(u)))).map((i) => i.epoch ?? -1));
    const firstSeen = new Map<string, number>();
    // A new session adds a process and a thread: the next commit carries it.
    const opened = openSession({ scheduler: urls[1]!, runtime: 'r1', process: 'propagation-probe' });
    const deadline = performance.now() + 10_000;
    while (firstSeen.size < urls.length && performance.now() < deadline) {
      const infos = await Promise.all(urls.map((u) => getEpoch(u)));
      const now = performance.now();
      for (const info of infos) {
        if ((info.epoch ?? -1) > before && !firstSeen.has(info.replica)) firstSeen.set(info.replica, now);
      }
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    await opened;
    assert.equal(firstSeen.size, urls.length, `replicas that saw a commit after epoch ${before}`);
    const spreadMs = Math.max(...firstSeen.values()) - Math.min(...firstSeen.values());
    console.log(`# commit after epoch ${before} reached all replicas within ${spreadMs.toFixed(0)} ms`);
    assert.ok(spreadMs <= 1000, `spread ${spreadMs} ms`);
  });

  it('answers 1,000 random schedule requests identically on every replica of one epoch', async () => {
    const next = idStream(20260728);
    let compared = 0;
    let retried = 0;
    let scheduled = 0;
    const one = async (): Promise<void> => {
      for (;;) {
        // Most requests name the served class; one in eight an unknown one (answered unschedulable).
        const cls = Number.parseInt(next(), 36) % 8 === 0 ? `c-${next()}` : 'demo';
        const request = { class: cls, processId: `p-${next()}`, threadId: `t-${next()}` };
        const answers = await Promise.all(urls.map((u) => schedule(u, request)));
        const epochs = new Set(answers.map((a) => `${a.body.term}/${a.body.epoch}`));
        if (epochs.size !== 1) {
          retried++;
          assert.ok(retried < 200, 'the epoch kept moving during the comparison');
          continue;
        }
        const digest = answers.map((a) => ({
          status: a.status,
          runtime: a.body.runtime,
          source: a.body.source,
          unschedulable: (a.body.unschedulable as { code?: string } | undefined)?.code,
        }));
        for (let i = 1; i < digest.length; i++) {
          assert.deepEqual(digest[i], digest[0], `${JSON.stringify(request)} on ${urls[i]} vs ${urls[0]}`);
        }
        if (digest[0]!.status === 200) scheduled++;
        compared++;
        return;
      }
    };
    let issued = 0;
    await Promise.all(
      Array.from({ length: CONCURRENCY }, async () => {
        while (issued < REQUESTS) {
          issued++;
          await one();
        }
      }),
    );
    console.log(`# ${compared} requests compared (${scheduled} scheduled), ${retried} retried on an epoch change`);
    assert.equal(compared, REQUESTS);
    assert.ok(scheduled > REQUESTS / 2, 'most requests name the served class and are placed');
  });

  it('makes a runtime connected to a follower schedulable and reachable through every replica', async () => {
    const leader = await cluster.leader();
    const runtimes = (await (await fetch(`${urls[0]}/api/runtimes`)).json()) as {
      runtimes: Array<{ id: string; owner: string }>;
    };
    const onFollower = runtimes.runtimes.find((r) => r.owner !== leader.name);
    assert.ok(onFollower, `a runtime owned by a follower in ${JSON.stringify(runtimes)}`);
    const others = runtimes.runtimes.filter((r) => r.id !== onFollower.id).map((r) => r.id);
    for (const url of urls) {
      const placed = await schedule(url, { class: 'demo', processId: 'on-follower', exclude: others });
      assert.equal(placed.status, 200, JSON.stringify(placed.body));
      assert.equal(placed.body.runtime, onFollower.id);
      assert.match(String(placed.body.proxyUrl), new RegExp(`/api/proxy/${onFollower.id}$`));
      const health: Response = await fetch(`${url}/api/proxy/${onFollower.id}/healthz`);
      assert.equal(health.status, 200, `healthz of ${onFollower.id} through ${url}`);
      await health.arrayBuffer();
    }
  });

  const badSchedules: Array<{ name: string; body: unknown; field: RegExp }> = [
    { name: 'a process id with a space', body: { class: 'demo', processId: 'a b' }, field: /processId/ },
    { name: 'a class of 129 characters', body: { class: 'c'.repeat(129), processId: 'p' }, field: /class/ },
    { name: 'a missing process id', body: { class: 'demo' }, field: /processId/ },
    { name: 'a thread id with a slash', body: { class: 'demo', processId: 'p', threadId: 'a/b' }, field: /threadId/ },
    {
      name: 'an excluded runtime id that is empty',
      body: { class: 'demo', processId: 'p', exclude: [''] },
      field: /exclude\[0\]/,
    },
    { name: 'a numeric class', body: { class: 7, processId: 'p' }, field: /class/ },
    { name: 'an unknown field', body: { class: 'demo', processId: 'p', tenant: 'x' }, field: /tenant/ },
  ];
  for (const { name, body, field } of badSchedules) {
    it(`rejects a schedule request with ${name} with 400 naming the field, on every replica`, async () => {
      for (const url of urls) {
        const answer = await schedule(url, body);
        assert.equal(answer.status, 400);
        assert.match(String(answer.body.error), field);
      }
    });
  }

  it('rejects a schedule body that is not JSON with 400 parse_error', async () => {
    const answer = await schedule(urls[0]!, '{"class":');
    assert.equal(answer.status, 400);
    assert.equal(answer.body.code, 'parse_error');
  });

  it('answers 404 for an unknown runtime and 502 JSON when proxying to it, on every replica', async () => {
    for (const url of urls) {
      const info = await fetch(`${url}/api/runtime/no-such-runtime`);
      assert.equal(info.status, 404);
      assert.equal(((await info.json()) as { code: string }).code, 'runtime_not_found');
      const proxied = await fetch(`${url}/api/proxy/no-such-runtime/healthz`);
      assert.equal(proxied.status, 502);
      assert.match(proxied.headers.get('content-type') ?? '', /application\/json/);
      assert.equal(((await proxied.json()) as { runtime: string }).runtime, 'no-such-runtime');
    }
  });

  const badSyncMessages: Array<{ name: string; frame: string; reason: RegExp }> = [
    { name: 'text that is not JSON', frame: 'garbage{', reason: /not JSON/ },
    {
      name: 'a collect whose term is a string',
      frame: JSON.stringify({
        type: 'collect',
        term: 'one',
        epoch: 0,
        replica: 'intruder',
        version: 0,
        part: { kind: 'full', runtimes: [] },
      }),
      reason: /term/,
    },
    { name: 'a message of an unknown type', frame: JSON.stringify({ type: 'takeover', term: 99 }), reason: /type/ },
  ];
  for (const { name, frame, reason } of badSyncMessages) {
    it(`closes a sync connection that sends ${name} with 1008 naming the problem, and keeps committing`, async () => {
      const leader = await cluster.leader();
      // A peer with the cluster's token: the frames, not the credentials, are under test.
      const ws = new WebSocket(`${leader.url!.replace('http', 'ws')}/api/sync/intruder`, {
        headers: { authorization: `Bearer ${cluster.token}` },
      });
      const closed = new Promise<{ code: number; reason: string }>((resolve) =>
        ws.once('close', (code, why) => resolve({ code, reason: why.toString() })),
      );
      await new Promise<void>((resolve, reject) => {
        ws.once('open', resolve);
        ws.once('error', reject);
      });
      ws.send(frame);
      const { code, reason: why } = await closed;
      assert.equal(code, 1008);
      assert.match(why, reason);
      await assertStillCommitting(urls, `after-${name.replaceAll(' ', '-')}`);
    });
  }
});

/** A change on a follower's runtime still reaches every replica, and schedules still succeed. */
async function assertStillCommitting(urls: readonly string[], process: string): Promise<void> {
  const infos: EpochInfo[] = await Promise.all(urls.map((u) => getEpoch(u)));
  const before = Math.max(...infos.map((i) => i.epoch ?? -1));
  await openSession({ scheduler: urls[2]!, runtime: 'r1', process });
  const deadline = performance.now() + 5000;
  for (;;) {
    const now = await Promise.all(urls.map((u) => getEpoch(u)));
    if (now.every((i) => (i.epoch ?? -1) > before)) break;
    assert.ok(performance.now() < deadline, `no new epoch after ${before} everywhere: ${JSON.stringify(now)}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  for (const url of urls) {
    const answer = await schedule(url, { class: 'demo', processId: process.slice(0, 100) });
    assert.equal(answer.status, 200, JSON.stringify(answer.body));
  }
}
