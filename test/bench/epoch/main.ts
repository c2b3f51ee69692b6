// Epoch sync bench: leader and two followers in one process over real
// WebSockets on 127.0.0.1. The fleet holds 100,000 threads; 1 % of them are
// replaced per second, spread over every replica's part. Measured: time from
// a part change on follower f1 to the commit carrying it being applied on
// follower f2 (p50/p99), and bytes per delta commit — once for 100 and once
// for 1,000 runtimes, to show cost follows churn, not fleet size. Both after
// a warm-up of churn: the figure is the steady state, not the seconds after
// followers attach (full parts, first snapshot, first merges). Then, with
// replicas as OS processes: failover time after a kill -9 of the leader
// (default and tuned election settings) and schedule answers per second on
// one replica.
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { systemClock } from '@switchyard/clock';
import type { ClusterOp, RuntimeState, ThreadRef } from '@switchyard/protocol';
import { EpochFollower, EpochLeader, connectSync, createSyncServer, type EpochSink } from '@switchyard/epoch';
import { applyOps, diffStates, mergeParts } from '@switchyard/scheduling';
import { percentile, progress, report } from '../report.ts';

const compareIds = (a: string, b: string): number => (a < b ? -1 : a > b ? 1 : 0);
const compareThreads = (a: ThreadRef, b: ThreadRef): number =>
  compareIds(a.process, b.process) || compareIds(a.thread, b.thread);
import { measureFailover } from './failover.ts';
import { measureScheduleLoad } from './schedule-load.ts';
import type { Figure } from '../report.ts';

const THREADS_TOTAL = 100_000;
const CHURN_PER_S = 0.01;
const TICK_MS = 50;
const WARMUP_MS = 2_000;
const MEASURE_MS = 8_000;
const THREADS_PER_PROCESS = 10;

/**
 * One replica's part, rewritten copy-on-write so unchanged runtimes keep
 * their identity, with lists in canonical order — as a scheduler's local
 * part hands them to epoch sync.
 */
class Part {
  states: RuntimeState[];
  #seq = 0;
  constructor(owner: string, runtimes: number, threadsPerRuntime: number) {
    this.states = [];
    for (let r = 0; r < runtimes; r++) {
      const threads = Array.from({ length: threadsPerRuntime }, (_, i) => ({
        process: `p${Math.floor(i / THREADS_PER_PROCESS)}`,
        thread: `t${i}`,
      }));
      this.states.push({
        runtime: {
          id: `${owner}-r${r}`,
          classes: ['default'],
          metadata: {},
          version: '1.0.0',
          idleWeight: { sandboxes: 100 },
          available: true,
          owner,
          generation: 1,
        },
        processes: [...new Set(threads.map((t) => t.process))].sort(compareIds),
        threads: threads.sort(compareThreads),
      });
    }
  }

  /** Replaces `count` threads on random runtimes; the first new thread is named `marker` if given. */
  churn(count: number, marker?: string): void {
    const next = [...this.states];
    for (let i = 0; i < count; i++) {
      const index = Math.floor(Math.random() * next.length);
      const state = next[index]!;
      const threads = state.threads.slice(1);
      const process = state.threads[0]!.process;
      const added = { process, thread: i === 0 && marker ? marker : `n${++this.#seq}` };
      const at = threads.findIndex((t) => compareThreads(t, added) > 0);
      threads.splice(at < 0 ? threads.length : at, 0, added);
      next[index] = { ...state, threads };
    }
    this.states = next;
  }
}

async function runSize(runtimes: number): Promise<Figure[]> {
  const perReplica = Math.ceil(runtimes / 3);
  const threadsPerRuntime = Math.floor(THREADS_TOTAL / runtimes);
  const parts = { leader: new Part('leader', perReplica, threadsPerRuntime) } as Record<string, Part>;
  parts.f1 = new Part('f1', perReplica, threadsPerRuntime);
  parts.f2 = new Part('f2', runtimes - 2 * perReplica, threadsPerRuntime);

  const commitBytes: number[] = [];
  let snapshotBytes = 0;
  let measuring = false;
  const leader = new EpochLeader({
    replicaId: 'leader',
    term: 1,
    clock: systemClock,
    localPart: () => parts.leader!.states,
    merge: mergeParts,
    diff: diffStates,
    apply: applyOps,
    onCommit: (info) => {
      if (info.epoch === 1) snapshotBytes = info.bytes;
      else if (measuring) commitBytes.push(info.bytes);
    },
  });
  const sync = createSyncServer({ onConnection: (conn, replica) => leader.attach(conn, replica) });
  const http = createServer((_req, res) => res.writeHead(404).end());
  http.on('upgrade', (req, socket, head) => void sync.handleUpgrade(req, socket, head));
  await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', resolve));
  const base = `http://127.0.0.1:${(http.address() as AddressInfo).port}`;

  const sentAt = new Map<string, number>();
  const latencies: number[] = [];
  let synced = false;
  const watchSink = {
    snapshot: () => void (synced = true),
    delta: (_e: number, _t: number, _b: number, ops: readonly ClusterOp[]) => {
      for (const op of ops) {
        if (op.op !== 'thread.add' || !op.thread.startsWith('m')) continue;
        const t0 = sentAt.get(op.thread);
        if (t0 !== undefined) latencies.push(performance.now() - t0);
        sentAt.delete(op.thread);
      }
    },
  };
  const quietSink: EpochSink = { snapshot: () => {}, delta: () => {} };
  const follower = (replica: string, sink: EpochSink): EpochFollower =>
    new EpochFollower({
      replicaId: replica,
      clock: systemClock,
      localPart: () => parts[replica]!.states,
      diff: diffStates,
      apply: applyOps,
      sink,
    });
  const f1 = follower('f1', quietSink);
  const f2 = follower('f2', watchSink);
  f1.attach(await connectSync(base, 'f1'));
  f2.attach(await connectSync(base, 'f2'));
  while (!synced || leader.latest() === undefined) await new Promise((r) => setTimeout(r, 20));
  progress(
    `${runtimes} runtimes: first snapshot ${snapshotBytes} bytes; churning for ${WARMUP_MS} ms warm-up + ${MEASURE_MS} ms`,
  );

  const perTick = (THREADS_TOTAL * CHURN_PER_S * TICK_MS) / 1000;
  let marker = 0;
  const started = performance.now();
  while (performance.now() - started < WARMUP_MS + MEASURE_MS) {
    measuring = performance.now() - started >= WARMUP_MS;
    const name = measuring ? `m${++marker}` : undefined;
    parts.leader!.churn(Math.round(perTick / 3));
    parts.f2!.churn(Math.round(perTick / 3));
    if (name) sentAt.set(name, performance.now());
    parts.f1!.churn(Math.round(perTick / 3), name);
    leader.notifyChange();
    f1.notifyChange();
    f2.notifyChange();
    await new Promise((r) => setTimeout(r, TICK_MS));
  }
  await new Promise((r) => setTimeout(r, 300));
  f1.stop();
  f2.stop();
  leader.stop();
  sync.close();
  http.closeAllConnections();
  await new Promise((r) => http.close(r));

  latencies.sort((a, b) => a - b);
  const bytes = [...commitBytes].sort((a, b) => a - b);
  progress(
    `${runtimes} runtimes: ${latencies.length}/${marker} changes seen on f2, ${commitBytes.length} delta commits, ` +
      `median ${percentile(bytes, 50)} bytes`,
  );
  return [
    { metric: `propagation_p50_${runtimes}rt`, value: percentile(latencies, 50), unit: 'ms' },
    { metric: `propagation_p99_${runtimes}rt`, value: percentile(latencies, 99), unit: 'ms' },
    { metric: `commit_bytes_median_${runtimes}rt`, value: percentile(bytes, 50), unit: 'bytes' },
    { metric: `commits_per_s_${runtimes}rt`, value: commitBytes.length / (MEASURE_MS / 1000), unit: 'commits/s' },
    { metric: `snapshot_bytes_${runtimes}rt`, value: snapshotBytes, unit: 'bytes' },
  ];
}

const figures: Figure[] = [];
for (const runtimes of [100, 1000]) figures.push(...(await runSize(runtimes)));
figures.push(...(await measureScheduleLoad()));
figures.push(
  ...(await measureFailover('tuned', { leaseDurationMs: 3000, renewDeadlineMs: 2000, retryPeriodMs: 500 }, 5)),
);
figures.push(
  ...(await measureFailover('default', { leaseDurationMs: 15_000, renewDeadlineMs: 10_000, retryPeriodMs: 2000 }, 3)),
);
report('epoch', figures);
