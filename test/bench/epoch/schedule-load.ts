// Schedule throughput phase: one scheduler replica as an OS process with
// three runtimes, `POST /api/schedule` over keep-alive HTTP/1.1 from an undici
// Pool (32 connections, one request in flight on each). Every request names
// a new process, so each answer runs the whole pipeline and records a
// pending placement — the costlier path; a thread fast-path hit is cheaper.
import { readFileSync } from 'node:fs';
import { Pool } from 'undici';
import { startCluster } from '../../support/cluster.ts';
import { percentile, progress, type Figure } from '../report.ts';

const CONCURRENCY = 32;
const WARMUP_MS = 1_000;
const MEASURE_MS = 5_000;
/** Kernel clock ticks per second of /proc/<pid>/stat times (USER_HZ, 100 on Linux). */
const CLOCK_TICKS_PER_S = 100;

/**
 * CPU time a process has used so far, ms (user + system), from /proc. On a
 * shared machine req/s follows whoever else is busy; CPU per request does not.
 */
function cpuMsOf(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  // After the command: state is field 3 of stat(5), so utime (14) and stime (15) sit at 11 and 12 here.
  return ((Number(fields[11]) + Number(fields[12])) * 1000) / CLOCK_TICKS_PER_S;
}

export async function measureScheduleLoad(): Promise<Figure[]> {
  progress(`schedule load: 1 replica, 3 runtimes, ${CONCURRENCY} keep-alive connections, ${MEASURE_MS} ms`);
  // Production ping period: the harness's 300 ms is for fast failure tests, and a replica saturated on purpose
  // may answer a ping late enough to have a healthy runtime dropped.
  const cluster = await startCluster({ schedulers: 1, runtimes: 3, gateways: 0, tunnelPingIntervalMs: 5000 });
  const replicaPid = cluster.schedulers[0]!.pid;
  const pool = new Pool(cluster.schedulerUrls()[0]!, { connections: CONCURRENCY, pipelining: 1 });
  const statuses = new Map<number, number>();
  const latencies: number[] = [];
  let measuring = false;
  let stop = false;
  let seq = 0;
  let firstRefusal: string | undefined;
  const worker = async (w: number): Promise<void> => {
    while (!stop) {
      const body = `{"class":"demo","processId":"load-${w}-${seq++}"}`;
      const sentAt = performance.now();
      const res = await pool.request({
        path: '/api/schedule',
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body,
      });
      if (res.statusCode !== 200 && firstRefusal === undefined) firstRefusal = await res.body.text();
      else await res.body.dump();
      if (!measuring) continue;
      latencies.push(performance.now() - sentAt);
      statuses.set(res.statusCode, (statuses.get(res.statusCode) ?? 0) + 1);
    }
  };
  try {
    const workers = Array.from({ length: CONCURRENCY }, (_, w) => worker(w));
    await new Promise((resolve) => setTimeout(resolve, WARMUP_MS));
    measuring = true;
    const started = performance.now();
    const cpuBeforeMs = cpuMsOf(replicaPid);
    const clientBefore = process.cpuUsage();
    await new Promise((resolve) => setTimeout(resolve, MEASURE_MS));
    measuring = false;
    const replicaCpuMs = cpuMsOf(replicaPid) - cpuBeforeMs;
    const client = process.cpuUsage(clientBefore);
    const clientCpuMs = (client.user + client.system) / 1000;
    const elapsedMs = performance.now() - started;
    stop = true;
    await Promise.all(workers);
    const total = latencies.length;
    const ok = statuses.get(200) ?? 0;
    progress(
      `schedule load: ${total} answers in ${elapsedMs.toFixed(0)} ms, statuses ${JSON.stringify(Object.fromEntries(statuses))}; ` +
        `CPU: replica ${replicaCpuMs.toFixed(0)} ms, load generator ${clientCpuMs.toFixed(0)} ms`,
    );
    if (ok !== total) throw new Error(`${total - ok} schedule answers were not 200; the first: ${firstRefusal}`);
    latencies.sort((a, b) => a - b);
    return [
      { metric: 'schedule_rps', value: Math.round(total / (elapsedMs / 1000)), unit: 'req/s' },
      { metric: 'schedule_replica_cpu_per_request', value: (replicaCpuMs * 1000) / total, unit: 'us' },
      { metric: 'schedule_latency_p50', value: percentile(latencies, 50), unit: 'ms' },
      { metric: 'schedule_latency_p99', value: percentile(latencies, 99), unit: 'ms' },
    ];
  } finally {
    await pool.close();
    await cluster.stop();
  }
}
