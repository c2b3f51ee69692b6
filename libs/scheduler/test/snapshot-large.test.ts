// A kept epoch of a large fleet, read through GET /api/epoch/:id/snapshot on
// a real replica. The replica follows a leader run here (a real EpochLeader
// behind a real sync server on loopback, named by the Lease) whose own part
// is the large fleet, so the replica's history holds it as it would hold a
// real cluster's.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { systemClock } from '@switchyard/clock';
import { MemoryLeaseStore, formatHolder } from '@switchyard/election';
import { EpochLeader, createSyncServer, type SyncServer } from '@switchyard/epoch';
import type { RuntimeState } from '@switchyard/protocol';
import type { SchedulerReplica } from '@switchyard/scheduler';
import { applyOps, diffStates, mergeParts } from '@switchyard/scheduling';
import { getJson, startReplicas, until } from './support.ts';

const RUNTIMES = 100;
const THREADS_PER_RUNTIME = 4000; // 400,000 threads: 19 MB of JSON

function largeFleet(): RuntimeState[] {
  const states: RuntimeState[] = [];
  for (let r = 0; r < RUNTIMES; r++) {
    const processes: string[] = [];
    const threads: { process: string; thread: string }[] = [];
    for (let t = 0; t < THREADS_PER_RUNTIME; t++) {
      const process = `p-${r}-${Math.floor(t / 4)}`;
      if (t % 4 === 0) processes.push(process);
      threads.push({ process, thread: `t-${r}-${t}` });
    }
    const runtime = {
      id: `r${r}`,
      classes: ['demo'],
      metadata: {},
      version: '1.0.0',
      idleWeight: { sandboxes: 5 },
      available: true,
      owner: 'big',
      generation: 1,
    };
    states.push({ runtime, processes, threads });
  }
  return mergeParts([states]);
}

const cpuMs = ({ user, system }: NodeJS.CpuUsage): number => (user + system) / 1000;

/**
 * The most CPU time the main thread spent between two turns of its event loop while `work` ran, in ms: how
 * long one task held up every other request of the replica, less the time the process waited for a core.
 */
async function longestTurnCpuMs(work: () => Promise<void>): Promise<number> {
  let last = process.threadCpuUsage();
  let longest = 0;
  const beat = (): void => {
    const now = process.threadCpuUsage();
    longest = Math.max(longest, cpuMs(process.threadCpuUsage(last)));
    last = now;
  };
  const timer = setInterval(beat, 1);
  try {
    await work();
  } finally {
    clearInterval(timer);
    beat();
  }
  return longest;
}

describe('GET /api/epoch/:id/snapshot of a large fleet', () => {
  const fleet = largeFleet();
  let http: Server;
  let sync: SyncServer;
  let leader: EpochLeader;
  let replica: SchedulerReplica;

  before(async () => {
    leader = new EpochLeader({
      replicaId: 'big',
      term: 3,
      clock: systemClock,
      localPart: () => fleet,
      merge: mergeParts,
      diff: diffStates,
      apply: applyOps,
    });
    sync = createSyncServer({ onConnection: (conn, id) => leader.attach(conn, id) });
    http = createServer((_req, res) => res.writeHead(404).end());
    http.on('upgrade', (req, socket, head) => void sync.handleUpgrade(req, socket, head));
    await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', resolve));
    const address = `http://127.0.0.1:${(http.address() as AddressInfo).port}`;
    // The Lease names the leader run here for the whole test: the replica follows it and never leads.
    const store = new MemoryLeaseStore();
    const now = new Date();
    store.create({
      holderIdentity: formatHolder({ id: 'big', address }),
      leaseTransitions: 3,
      leaseDurationSeconds: 3600,
      acquireTime: now,
      renewTime: now,
    });
    [replica] = (await startReplicas(1, store)) as [SchedulerReplica];
  });

  after(async () => {
    await replica?.close();
    leader?.stop();
    sync?.close();
    if (!http) return;
    http.closeAllConnections();
    await new Promise((resolve) => http.close(resolve));
  });

  it('is the kept state, answered without holding up the replica for the time of serialising it whole', async () => {
    const epoch = leader.latest()?.epoch ?? (await until('a commit', () => leader.latest()?.epoch));
    await until(
      `epoch ${epoch} on the replica`,
      async () => (await getJson(`${replica.url}/api/epoch`)).body.epoch === epoch || undefined,
      30_000,
    );
    // A first read, unmeasured: what the replica built when it took the epoch is old by the second one, and
    // no longer weighs on the garbage collector.
    const res = await fetch(`${replica.url}/api/epoch/${epoch}/snapshot`);
    assert.equal(res.status, 200);
    assert.equal(res.headers.get('content-type'), 'application/json');
    const body = await res.text();

    let bytes = 0;
    const turnMs = await longestTurnCpuMs(async () => {
      const measured = await fetch(`${replica.url}/api/epoch/${epoch}/snapshot`);
      // Counted, not kept: a client holding 19 MB of chunks makes the garbage collector work harder meanwhile.
      for await (const chunk of measured.body!) bytes += (chunk as Uint8Array).byteLength;
    });
    // The bound: the CPU time of serialising the state whole, measured here after the request (its garbage
    // would otherwise weigh on the measurement), on this thread only (not the garbage collector's helpers,
    // nor the time the process waits for a core on a busy machine). The answer used to copy the kept state
    // and serialise the copy in one turn of the event loop: four to seven times this here (1.0-1.1 s against
    // 150-250 ms). Streamed from the kept state, a turn serialises one chunk, and takes what the garbage
    // collector's pauses add: at most half of this here (35-62 ms against 134-224 ms).
    const cpuBefore = process.threadCpuUsage();
    JSON.stringify({ epoch, runtimes: fleet });
    const wholeMs = cpuMs(process.threadCpuUsage(cpuBefore));

    assert.equal(bytes, Buffer.byteLength(body));
    // Parsed, as the replica's records went through the sync schemas, which order their keys their own way.
    assert.deepEqual(JSON.parse(body), { epoch, runtimes: fleet });
    const head = await fetch(`${replica.url}/api/epoch/${epoch}/snapshot`, { method: 'HEAD' });
    assert.equal(head.status, 200);
    assert.equal(await head.text(), '');
    assert.ok(
      turnMs < wholeMs,
      `one turn of the event loop took ${turnMs.toFixed(0)} ms of CPU (serialising the state whole: ${wholeMs.toFixed(0)} ms)`,
    );
  });
});
