// A replica with no epoch yet forwards a schedule request to the leader. Node's fetch refuses the ports
// browsers block (6000, 6665-6669, 10080, …) before it dials, but a leader served on one is a legitimate
// deployment: the forward must reach it like any other. The leader here is a stand-in on the first such
// port free on this machine (with none free, the test is skipped saying so); it holds the lease and
// answers /api/schedule, and never syncs, so the replica never gets an epoch of its own.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { MemoryLeaseStore, formatHolder } from '@switchyard/election';
import type { SchedulerReplica } from '@switchyard/scheduler';
import { FETCH_BLOCKED_PORTS, onBlockedPort } from '@switchyard/service/testing';
import { within } from '@switchyard/clock/testing';
import { postJson as postJsonTo } from '../src/forward.ts';
import { getJson, postJson, startReplicas, until } from './support.ts';

const ANSWER = { runtime: 'r-stand-in', source: 'selector', epoch: 7, term: 1 };

/** A stand-in leader: answers every /api/schedule with ANSWER and keeps the headers it was sent. */
function listenLeader(port: number, seen: IncomingHttpHeaders[]): Promise<Server> {
  const server = createServer((req, res) => {
    req.resume();
    if (req.method !== 'POST' || req.url !== '/api/schedule') return void res.writeHead(404).end();
    seen.push(req.headers);
    req.once('end', () => res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(ANSWER)));
  });
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, '127.0.0.1', () => resolve(server));
  });
}

describe('a replica with no epoch whose leader is on a port that fetch refuses', () => {
  const seen: IncomingHttpHeaders[] = [];
  let leader: Server | undefined;
  let replica: SchedulerReplica | undefined;

  before(async () => {
    const stand = await onBlockedPort((port) => listenLeader(port, seen));
    if (!stand) return;
    leader = stand.started;
    const store = new MemoryLeaseStore();
    const now = new Date();
    store.create({
      holderIdentity: formatHolder({ id: 'ghost', address: `http://127.0.0.1:${stand.port}` }),
      leaseDurationSeconds: 3600,
      acquireTime: now,
      renewTime: now,
      leaseTransitions: 1,
    });
    replica = (await startReplicas(1, store))[0]!;
  });
  after(async () => {
    await replica?.close();
    await new Promise((resolve) => (leader ? leader.close(resolve) : resolve(undefined)));
  });

  it('forwards a schedule request to the leader there and relays its answer', async (t) => {
    if (!replica) return void t.skip(`every port of ${FETCH_BLOCKED_PORTS.join(', ')} is taken on this machine`);
    const at = replica;
    await until('the replica to see the stand-in leader', async () => {
      const { body } = await getJson(`${at.url}/api/epoch`);
      return body.leader?.id === 'ghost' || undefined;
    });
    const answer = await postJson(`${at.url}/api/schedule`, { class: 'demo', processId: 'p-1' });
    assert.deepEqual(answer, { status: 200, body: ANSWER });
    assert.equal(seen.length, 1);
    assert.equal(seen[0]!['x-switchyard-hop'], '1');
  });
});

describe('postJson, the forward to the leader', () => {
  const servers: Server[] = [];
  after(() => {
    for (const server of servers) {
      server.closeAllConnections();
      server.close();
    }
  });

  it('rejects when the answer stalls past its timeout, body included', async () => {
    const server = createServer((req, res) => {
      req.resume();
      res.writeHead(200, { 'content-type': 'application/json' });
      res.write('{"runtime":');
    });
    servers.push(server);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as AddressInfo;
    await within(assert.rejects(postJsonTo(`http://127.0.0.1:${port}/api/schedule`, {}, 200)), 5000, 'the timeout');
  });

  it('rejects when nothing listens', async () => {
    await within(assert.rejects(postJsonTo('http://127.0.0.1:1/api/schedule', {}, 5000)), 5000, 'the refusal');
  });
});
