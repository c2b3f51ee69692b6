// Scheduling core benchmark: decisions per second on the thread fast path and
// through the full pipeline, the cost of applying deltas, and heap bytes per
// thread entry, for 100 / 1,000 / 10,000 runtimes holding 100,000 processes
// and 1,000,000 threads. Run with `npm run bench -- scheduling` (adds --expose-gc).
import { ClusterIndex, diffStates, schedule } from '@switchyard/scheduling';
import type { ClusterOp, Runtime, ScheduleRequest } from '@switchyard/protocol';
import { progress, report } from '../report.ts';
import type { Figure } from '../report.ts';

const PROCESSES = 100_000;
const THREADS_PER_PROCESS = 10;
const RUNTIME_COUNTS = [100, 1_000, 10_000];
const MEASURE_MS = 1_500;
const TARGETS = { fastPathPerS: 1_000_000, pipeline1kPerS: 50_000, pipeline10kPerS: 5_000, threadBytesMax: 300 };

const gc = (globalThis as { gc?: () => void }).gc;
if (gc === undefined) throw new Error('run with --expose-gc (npm run bench -- scheduling does)');

// Seeded LCG: the same fleet on every run.
let seed = 42;
const rand = (): number => (seed = (Math.imul(seed, 1664525) + 1013904223) >>> 0) / 2 ** 32;
const HEX = '0123456789abcdef';
const codes: number[] = new Array<number>(32);
// Realistic thread ids: 32 hex characters, like a 128-bit session id, built
// flat (as JSON.parse yields them) rather than as a rope of concatenations.
function threadId(): string {
  for (let i = 0; i < 32; i++) codes[i] = HEX.charCodeAt(Math.floor(rand() * 16));
  return String.fromCharCode(...codes);
}

function makeRuntime(i: number): Runtime {
  const roll = rand();
  return {
    id: `rt-${String(i).padStart(5, '0')}`,
    classes: ['default'],
    metadata: { zone: i % 3 === 0 ? 'eu' : 'us', pool: `pool-${i % 7}` },
    version: `1.${i % 5}.0`,
    // ~10 % saturated, ~5 % unavailable: the availability filter has work to do.
    idleWeight: { sandboxes: roll < 0.1 ? 0 : 1 + Math.floor(rand() * 100), memoryMb: 256 + Math.floor(rand() * 4096) },
    available: roll < 0.1 || roll >= 0.15,
    owner: `replica-${i % 3}`,
    generation: 1,
  };
}

function heapUsed(): number {
  gc!();
  gc!();
  return process.memoryUsage().heapUsed;
}

/** Calls per second of wall-clock time, and per second of this process's CPU time. */
interface Rate {
  readonly wall: number;
  readonly cpu: number;
}

/**
 * Runs `fn` in a loop for about MEASURE_MS. The CPU-time figure is the
 * one-core cost even when other processes share the cores (it counts this
 * process's GC threads too, so it errs low).
 */
function rate(fn: (i: number) => void): Rate {
  for (let i = 0; i < 20_000; i++) fn(i); // warm-up
  let calls = 0;
  const start = performance.now();
  const cpuStart = process.cpuUsage();
  let elapsed = 0;
  while (elapsed < MEASURE_MS) {
    for (let j = 0; j < 1_000; j++) fn(calls++);
    elapsed = performance.now() - start;
  }
  const cpu = process.cpuUsage(cpuStart);
  return { wall: (calls / elapsed) * 1_000, cpu: (calls / (cpu.user + cpu.system)) * 1e6 };
}

const perS = (r: Rate): string => `${Math.round(r.wall)}/s wall, ${Math.round(r.cpu)}/cpu-s`;

interface Built {
  readonly index: ClusterIndex;
  readonly threads: { process: string; thread: string }[];
  readonly bytesPerThread: number;
}

function build(runtimeCount: number): Built {
  const states = Array.from({ length: runtimeCount }, (_, i) => ({
    runtime: makeRuntime(i),
    processes: [] as string[],
    threads: [],
  }));
  const index = ClusterIndex.from(states);
  const processIds = Array.from({ length: PROCESSES }, (_, p) => `proc-${p}`);
  for (let p = 0; p < PROCESSES; p++) {
    index.apply({ op: 'process.add', runtimeId: states[p % runtimeCount]!.runtime.id, process: processIds[p]! });
  }
  // A sample of threads on available runtimes feeds the fast-path requests;
  // it is allocated up front so it does not count as index growth.
  const sample: { process: string; thread: string }[] = Array.from({ length: 10_000 }, () => ({
    process: '',
    thread: '',
  }));
  let sampled = 0;
  const before = heapUsed();
  for (let p = 0; p < PROCESSES; p++) {
    const { id: runtimeId, available } = states[p % runtimeCount]!.runtime;
    for (let t = 0; t < THREADS_PER_PROCESS; t++) {
      const thread = threadId();
      index.apply({ op: 'thread.add', runtimeId, process: processIds[p]!, thread });
      if (available && t === 0 && sampled < sample.length) {
        sample[sampled]!.process = processIds[p]!;
        sample[sampled++]!.thread = thread;
      }
    }
  }
  const bytesPerThread = (heapUsed() - before) / (PROCESSES * THREADS_PER_PROCESS);
  return { index, threads: sample.slice(0, sampled), bytesPerThread };
}

function deltaBatch(runtimeIds: readonly string[], round: number): ClusterOp[] {
  const ops: ClusterOp[] = [];
  for (let i = 0; i < 1_000; i++) {
    const runtimeId = runtimeIds[(i * 7919 + round) % runtimeIds.length]!;
    const kind = i % 4;
    if (kind === 0) ops.push({ op: 'weight', runtimeId, idleWeight: { sandboxes: i % 50, memoryMb: 1_024 } });
    else if (kind === 1) ops.push({ op: 'process.add', runtimeId, process: `delta-${round}-${i}` });
    else if (kind === 2)
      ops.push({ op: 'thread.add', runtimeId, process: `delta-${round}-${i - 1}`, thread: threadId() });
    else ops.push({ op: 'process.remove', runtimeId, process: `delta-${round}-${i - 2}` });
  }
  return ops;
}

const figures: Figure[] = [];
const ratios: string[] = [];
for (const runtimeCount of RUNTIME_COUNTS) {
  seed = 42 + runtimeCount;
  const buildStart = performance.now();
  const { index, threads, bytesPerThread } = build(runtimeCount);
  const counts = index.counts();
  progress(
    `${runtimeCount} runtimes: ${counts.processes} processes, ${counts.threads} threads, built in ${Math.round(performance.now() - buildStart)} ms`,
  );

  // Requests carry their own copies of the ids, as parsed request bodies do,
  // so lookups hash and compare strings instead of hitting pointer equality.
  const copy = (s: string): string => JSON.parse(JSON.stringify(s)) as string;
  const fastRequests: ScheduleRequest[] = threads.map((t) => ({
    class: 'default',
    processId: copy(t.process),
    threadId: copy(t.thread),
    sticky: true,
  }));
  const fast = rate((i) => {
    const d = schedule(index, fastRequests[i % fastRequests.length]!);
    if (!d.ok || d.source !== 'thread') throw new Error('fast path missed');
  });

  const newRequests: ScheduleRequest[] = Array.from({ length: 50_000 }, (_, i) => ({
    class: 'default',
    processId: `new-${i}`,
    sticky: true,
  }));
  const pipeline = rate((i) => {
    const d = schedule(index, newRequests[i % newRequests.length]!);
    if (!d.ok || d.source !== 'pipeline') throw new Error(`pipeline failed: ${JSON.stringify(d)}`);
  });

  // Cold: a weight change before every decision, so nothing computed for the
  // previous snapshot (open view, ranking) can be reused.
  const churn = index.runtimes()[1]!.id;
  const cold = rate((i) => {
    index.apply({ op: 'weight', runtimeId: churn, idleWeight: { sandboxes: 1 + (i % 2), memoryMb: 1_024 } });
    const d = schedule(index, newRequests[i % newRequests.length]!);
    if (!d.ok) throw new Error(`pipeline failed: ${JSON.stringify(d)}`);
  });

  const runtimeIds = index.runtimes().map((r) => r.id);
  const batches = Array.from({ length: 20 }, (_, round) => deltaBatch(runtimeIds, round));
  // The epoch leader diffs whole snapshots; measure it once, at the middle size.
  const prev = runtimeCount === 1_000 ? index.toStates() : undefined;
  const applyStart = performance.now();
  for (const batch of batches) index.applyAll(batch);
  const applyMs = (performance.now() - applyStart) / batches.length;
  if (prev !== undefined) {
    const next = index.toStates();
    const diffStart = performance.now();
    const ops = diffStates(prev, next);
    const diffMs = performance.now() - diffStart;
    progress(
      `diffStates over ${counts.threads} threads, ${batches.length * 1_000} deltas: ${ops.length} ops in ${diffMs.toFixed(0)} ms`,
    );
    figures.push({ metric: `diff_states_${runtimeCount}_runtimes`, value: diffMs, unit: 'ms' });
  }

  progress(
    `${runtimeCount} runtimes: fast path ${perS(fast)}; pipeline ${perS(pipeline)}; cold ${perS(cold)}; 1,000 deltas ${applyMs.toFixed(2)} ms; ${bytesPerThread.toFixed(1)} B/thread`,
  );
  for (const [name, r] of [
    ['fast_path', fast],
    ['pipeline', pipeline],
    ['pipeline_cold', cold],
  ] as const) {
    figures.push(
      { metric: `${name}_${runtimeCount}_runtimes`, value: Math.round(r.wall), unit: 'decisions/s' },
      { metric: `${name}_${runtimeCount}_runtimes_cpu`, value: Math.round(r.cpu), unit: 'decisions/cpu-s' },
    );
  }
  figures.push(
    { metric: `apply_1000_deltas_${runtimeCount}_runtimes`, value: applyMs, unit: 'ms' },
    { metric: `heap_per_thread_${runtimeCount}_runtimes`, value: bytesPerThread, unit: 'bytes' },
  );
  const ratio = (r: Rate, target: number): string =>
    `${(r.wall / target).toFixed(2)}x wall, ${(r.cpu / target).toFixed(2)}x cpu of ${target}/s`;
  ratios.push(`fast path @${runtimeCount}: ${ratio(fast, TARGETS.fastPathPerS)}`);
  const pipelineTarget =
    runtimeCount === 1_000 ? TARGETS.pipeline1kPerS : runtimeCount === 10_000 ? TARGETS.pipeline10kPerS : 0;
  if (pipelineTarget > 0) {
    ratios.push(`pipeline @${runtimeCount}: ${ratio(pipeline, pipelineTarget)}`);
    ratios.push(`pipeline cold @${runtimeCount}: ${ratio(cold, pipelineTarget)}`);
  }
  ratios.push(
    `heap @${runtimeCount}: ${(TARGETS.threadBytesMax / bytesPerThread).toFixed(2)}x headroom under 300 B/thread`,
  );
}

for (const line of ratios) progress(`target ${line}`);
report('scheduling', figures);
