// Gateway bench: one scheduler, runtimes and gateways as OS processes on
// loopback. Measured in one run, so the ratios compare like with like:
// - `tools/call` (echo) latency p50/p99 and req/s at concurrency 1 and 32 for
//   the runtime's direct listener, a gateway in direct mode, a gateway going
//   through the scheduler's tunnel (proxy mode), the scheduler's
//   `/api/proxy` and a relay connection called straight (the tunnel-mode
//   path without the gateway's hop, which splits that path's cost between its
//   two hops; the gateway sends its POSTs on relay connections), and the latency
//   floor: a bare Node + undici pass-through to the direct listener
//   (passthrough.ts), which is what one more hop costs on this machine before
//   any gateway work;
// - RSS of one fresh gateway (proxy mode) holding idle legacy sessions with
//   open GET streams, read from /proc/<pid>/status at three counts, and of a
//   bare Node HTTP server holding as many idle event streams (the baseline).
// Raw HTTP over undici Pools with sessions opened before the timed loops.
// Every loop has a fixed count. Gateways run with GATEWAY_ENV, as deployed:
// the Node options and malloc tunables of the gateway chart, and a warm
// module compile cache (the image ships one, see the Dockerfile).
//
// How many idle streams one gateway is measured with:
// - a relayed stream holds the client's socket; upstream it is an HTTP/2
//   stream on one of a few connections to the scheduler
//   (eventStreamsOverHttp2), so N streams need about N descriptors in the
//   gateway. The idle gateway runs with its soft limit raised to the hard
//   one (holding streams is what a proxy's limit is sized for); raising the
//   hard limit needs CAP_SYS_RESOURCE, which a container often lacks, so N
//   is the largest round hundred under hard - FD_SPARE, at most 10,000. When
//   that is under 10,000, the 10,000 line adds the rest at the measured
//   slope (and says so);
// - one runtime's tunnel carries at most 4,096 concurrent streams
//   (H2_TUNING.maxConcurrentStreams), so the idle phase adds runtimes until
//   each carries about STREAMS_PER_RUNTIME;
// - the idle gateway runs in proxy mode, the default deployment (a direct
//   mode gateway holds an HTTP/1.1 connection to the runtime per stream).
import { execFileSync, spawn } from 'node:child_process';
import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { Pool } from 'undici';
import { parse } from 'yaml';
// test/support is this test tree's own process harness, not another package.
import { startCluster, type TestCluster } from '../../support/cluster.ts';
import { spawnApp, type AppProcess } from '../../support/processes.ts';
import { percentile, progress, report, type Figure } from '../report.ts';
import { closeSession, echo, LEGACY, openSession, poolFor, type Session, type Target } from './targets.ts';

const TOKEN = 'bench-direct-token-0123456789';
const CONCURRENCIES = [1, 32] as const;
const CALLS = { 1: 2000, 32: 8000 } as const;
/** Interleaved rounds per concurrency; CALLS divide evenly, and so do ROUNDS by the number of targets. */
const ROUNDS = 10;
const WARMUP_CALLS = 300;
const IDLE_TARGET = 10_000;
/**
 * Descriptors the idle gateway needs besides its streams: listeners, stdio,
 * epoll, and the keep-alive connections left from opening sessions in
 * batches of IDLE_BATCH (up to two per session being opened).
 */
const FD_SPARE = 400;
/** Streams per runtime tunnel in the idle phase: well under the 4,096 cap, so an uneven spread still fits. */
const STREAMS_PER_RUNTIME = 2_500;
const IDLE_SESSIONS = idleSessions();
const IDLE_BATCH = 100;
/** Sandboxes the idle sessions share (each runtime caps its sandboxes at 200 here, not its sessions). */
const IDLE_PROCESSES = 100;
/**
 * The environment the gateway chart deploys with, read from its default
 * values so the bench measures what is installed: Node options (a small
 * young generation; the app itself sets the old generation's growth) and
 * glibc malloc tunables (see the chart's values.yaml).
 */
const CHART = parse(readFileSync(join(import.meta.dirname, '../../../charts/gateway/values.yaml'), 'utf8')) as {
  nodeOptions: string;
  glibcTunables: string;
};
/**
 * Node's module compile cache, as the image ships it: a process whose
 * modules are all in it never loads the type stripper (about 16–28 MB of
 * RSS at start). Filled by warmCompileCache before anything is measured.
 */
const COMPILE_CACHE = join(tmpdir(), 'switchyard-bench-compile-cache');
const GATEWAY_ENV = {
  NODE_OPTIONS: CHART.nodeOptions,
  GLIBC_TUNABLES: CHART.glibcTunables,
  NODE_COMPILE_CACHE: COMPILE_CACHE,
};
/** Idle streams are opened in this many equal steps, RSS read after each. */
const IDLE_STEPS = 3;
const IDLE_SETTLE_MS = 2000;

/** Streams one gateway can hold here (see the top of this file), in thousands, at most IDLE_TARGET. */
function idleSessions(): number {
  const override = process.env.BENCH_IDLE_SESSIONS;
  if (override !== undefined) return Number(override);
  const limit = (flag: string): number => Number(execFileSync('sh', ['-c', `ulimit ${flag}`], { encoding: 'utf8' }));
  const hard = limit('-Hn');
  const soft = limit('-Sn');
  if (!Number.isFinite(hard) || !Number.isFinite(soft)) return IDLE_TARGET;
  // The idle gateway's soft limit is raised to the hard one (RAISE_FD_LIMIT); this process holds the client ends.
  return Math.min(IDLE_TARGET, Math.floor((Math.min(hard, soft) - FD_SPARE) / 100) * 100);
}

/**
 * Loads every module the gateway and the baseline server load at start, with
 * GATEWAY_ENV, so the measured processes start as a deployed image's do
 * (the Dockerfile warms its cache the same way).
 */
function warmCompileCache(): void {
  const env = { ...process.env, ...GATEWAY_ENV };
  const root = join(import.meta.dirname, '../../..');
  execFileSync(process.execPath, [join(root, 'apps/gateway/src/main.ts'), '--help'], { env, stdio: 'ignore' });
  // Prints its port and exits when stdin closes (here at once).
  execFileSync(process.execPath, [join(import.meta.dirname, 'idle-server.ts')], { env, input: '', stdio: 'pipe' });
}

/** A helper server of this bench (serve-child.ts) running as its own process. */
interface ChildServer {
  readonly pid: number;
  readonly port: number;
  /** Closes its stdin, which ends it; resolves on exit. */
  stop(): Promise<void>;
}

/**
 * Starts `script` (in this folder) with `args` and the gateway's Node
 * options, through `wrapper` when given; resolves once it printed its port.
 */
async function startChildServer(script: string, args: string[], wrapper: readonly string[] = []): Promise<ChildServer> {
  const command = [...wrapper, process.execPath, join(import.meta.dirname, script), ...args];
  const child = spawn(command[0]!, command.slice(1), {
    stdio: ['pipe', 'pipe', 'inherit'],
    env: { ...process.env, ...GATEWAY_ENV },
  });
  const [line] = (await once(createInterface({ input: child.stdout! }), 'line')) as [string];
  return {
    pid: child.pid!,
    port: Number(line.trim()),
    stop: async () => {
      child.stdin!.end();
      if (child.exitCode === null) await once(child, 'exit');
    },
  };
}

/** What the bench stops at the end: the apps it spawned and the pass-through. */
type Stoppable = Pick<AppProcess, 'stop'> & Partial<Pick<AppProcess, 'name' | 'logs'>>;

/** On a failed run: the last warnings and errors each app logged, which say what went wrong on its side. */
function reportTrouble(apps: readonly Stoppable[]): void {
  for (const app of apps) {
    const trouble = (app.logs ?? []).filter((l) => Number(l.level) >= 40).slice(-5);
    for (const line of trouble) progress(`${app.name}: ${JSON.stringify(line)}`);
  }
}

/** Runs the app with its soft descriptor limit raised to the hard one (an unprivileged process may do that). */
const RAISE_FD_LIMIT = ['sh', '-c', 'ulimit -n "$(ulimit -Hn)" && exec "$@"', 'sh'];

interface Loop {
  readonly p50Ms: number;
  readonly p99Ms: number;
  readonly rps: number;
}

/** One target's open sessions and what its timed rounds collected. */
interface Lane {
  readonly target: Target;
  readonly pool: Pool;
  readonly sessions: Session[];
  readonly samples: number[];
  wallMs: number;
}

async function openLane(target: Target, concurrency: number): Promise<Lane> {
  const pool = poolFor(target, concurrency);
  const sessions: Session[] = [];
  for (let i = 0; i < concurrency; i++) sessions.push(await openSession(pool, target));
  await Promise.all(
    sessions.map(async (s) => {
      for (let n = 0; n < WARMUP_CALLS / concurrency; n++) await echo(s, n);
    }),
  );
  return { target, pool, sessions, samples: [], wallMs: 0 };
}

/** `calls` echo calls spread over the lane's sessions, timed into the lane. */
async function round(lane: Lane, calls: number): Promise<void> {
  let next = 0;
  const started = performance.now();
  await Promise.all(
    lane.sessions.map(async (s) => {
      while (next < calls) lane.samples.push(await echo(s, next++));
    }),
  );
  lane.wallMs += performance.now() - started;
}

/**
 * Every target at one concurrency, in ROUNDS interleaved rounds: on a shared,
 * loaded machine the load drifts within seconds, and target-after-target
 * loops charged that drift to whichever target ran during a busy spell.
 * Each round starts one target later, so every target runs in every place
 * of the order equally often and no place's share of the noise lands on
 * one target, the baseline included: with a fixed order, two gateway builds
 * measured 0.1 ms apart, and swapping their places turned the gap around.
 */
async function measureAll(targets: readonly Target[], concurrency: 1 | 32): Promise<Map<string, Loop>> {
  const lanes: Lane[] = [];
  try {
    for (const target of targets) lanes.push(await openLane(target, concurrency));
    for (let r = 0; r < ROUNDS; r++) {
      for (let i = 0; i < lanes.length; i++) await round(lanes[(r + i) % lanes.length]!, CALLS[concurrency] / ROUNDS);
    }
    const loops = new Map<string, Loop>();
    for (const lane of lanes) {
      const sorted = [...lane.samples].sort((a, b) => a - b);
      loops.set(lane.target.name, {
        p50Ms: percentile(sorted, 50),
        p99Ms: percentile(sorted, 99),
        rps: (sorted.length / lane.wallMs) * 1000,
      });
    }
    return loops;
  } finally {
    for (const lane of lanes) {
      await Promise.all(lane.sessions.map(closeSession));
      await lane.pool.close();
    }
  }
}

function rssBytes(pid: number): number {
  const kb = /^VmRSS:\s+(\d+) kB$/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1];
  return Number(kb) * 1024;
}

/** Opens sessions `from`..`to` through `target` on `pool`, each with a GET stream left open. */
async function holdIdleStreams(pool: Pool, target: Target, from: number, to: number): Promise<void> {
  const path = new URL(target.url).pathname;
  for (let batch = from; batch < to; batch += IDLE_BATCH) {
    await Promise.all(
      Array.from({ length: Math.min(IDLE_BATCH, to - batch) }, async (_, k) => {
        const i = batch + k;
        const headers = { 'x-switchyard-process': `idle-${i % IDLE_PROCESSES}` };
        const session = await openSession(pool, { ...target, headers: { ...target.headers, ...headers } });
        const res = await pool.request({
          path,
          method: 'GET',
          headers: { accept: 'text/event-stream', 'mcp-protocol-version': LEGACY, 'mcp-session-id': session.id },
        });
        if (res.statusCode !== 200) throw new Error(`GET stream ${i}: ${res.statusCode}`);
        res.body.on('error', () => undefined);
      }),
    );
    if (((batch - from) / IDLE_BATCH) % 20 === 0) progress(`idle sessions open: ${batch + IDLE_BATCH}`);
  }
}

/** RSS of the gateway once its allocations for the streams so far have settled. */
async function settledRss(pid: number): Promise<number> {
  await new Promise((r) => setTimeout(r, IDLE_SETTLE_MS));
  return rssBytes(pid);
}

/** Starts runtimes until the idle streams fit their tunnels at about STREAMS_PER_RUNTIME each. */
async function addIdleRuntimes(cluster: TestCluster): Promise<void> {
  const wanted = Math.max(1, Math.ceil(IDLE_SESSIONS / STREAMS_PER_RUNTIME));
  for (let i = cluster.runtimes.length; i < wanted; i++) await cluster.startRuntime(`r${i}`, 0);
  await cluster.waitForRuntimes(cluster.runtimes.map((r) => r.name));
}

/** RSS of an idle-stream holder after opening some number of streams. */
interface RssPoint {
  readonly streams: number;
  readonly rss: number;
}

/**
 * RSS of `pid` at start and after each of IDLE_STEPS equal steps up to
 * IDLE_SESSIONS streams, each step opened by `open(from, to)`. The cost per
 * stream is the slope between the first and the last step (the first step
 * also pays one-off costs: code compiled, pools filled).
 */
async function rssSteps(
  pid: number,
  open: (from: number, to: number) => Promise<void>,
  onStep: (point: RssPoint) => void = () => {},
): Promise<{ start: RssPoint; last: RssPoint; perStreamBytes: number }> {
  const points: RssPoint[] = [{ streams: 0, rss: await settledRss(pid) }];
  for (let step = 1; step <= IDLE_STEPS; step++) {
    const to = Math.round((IDLE_SESSIONS * step) / IDLE_STEPS);
    await open(points.at(-1)!.streams, to);
    points.push({ streams: to, rss: await settledRss(pid) });
    onStep(points.at(-1)!);
  }
  const [first, last] = [points[1]!, points.at(-1)!];
  return { start: points[0]!, last, perStreamBytes: (last.rss - first.rss) / (last.streams - first.streams) };
}

/**
 * The same idle streams held by a bare Node HTTP server (idle-server.ts,
 * with the gateway's environment): what the platform itself costs per
 * open event stream, measured in this run, to read the gateway's figure
 * against. Streams are opened with plain GETs, in the gateway's steps, and
 * the cost per stream is the slope between the first and the last step.
 */
async function idleBaseline(): Promise<Figure[]> {
  const child = await startChildServer('idle-server.ts', [], RAISE_FD_LIMIT);
  try {
    const origin = `http://127.0.0.1:${child.port}`;
    const streams = new Pool(origin, { connections: IDLE_SESSIONS + IDLE_BATCH });
    try {
      const { start, last, perStreamBytes } = await rssSteps(child.pid, async (from, to) => {
        for (let opened = from; opened < to; opened += IDLE_BATCH) {
          await Promise.all(
            Array.from({ length: Math.min(IDLE_BATCH, to - opened) }, async () => {
              const res = await streams.request({ path: '/', method: 'GET', headers: { accept: 'text/event-stream' } });
              if (res.statusCode !== 200) throw new Error(`baseline GET stream: ${res.statusCode}`);
              res.body.on('error', () => undefined);
            }),
          );
        }
      });
      progress(
        `bare Node HTTP server RSS ${(last.rss / 2 ** 20).toFixed(0)} MB with ${last.streams} idle event streams`,
      );
      return [
        { metric: 'baseline_rss_start', value: start.rss / 2 ** 20, unit: 'MB' },
        { metric: 'baseline_rss_idle_streams', value: last.rss / 2 ** 20, unit: 'MB' },
        { metric: 'baseline_rss_per_idle_stream', value: perStreamBytes / 1024, unit: 'KiB' },
      ];
    } finally {
      await streams.destroy();
    }
  } finally {
    await child.stop();
  }
}

/**
 * RSS of a fresh proxy-mode gateway (the latency loops' heap growth is not
 * charged to idle streams) at 0 and after each of IDLE_STEPS equal steps up
 * to IDLE_SESSIONS open GET streams. The slope between the first and last
 * step gives the cost per stream; the 10,000 line is measured when
 * IDLE_SESSIONS reaches it, else carried there at that slope (and named so).
 */
async function idleFigures(cluster: TestCluster, extra: Stoppable[]): Promise<Figure[]> {
  await addIdleRuntimes(cluster);
  const schedulers = cluster.schedulerUrls();
  const gateway = await spawnApp(
    'gateway',
    'g-idle',
    [
      ...['--host', '127.0.0.1', '--port', '0', '--default-class', 'demo', '--drain-delay-ms', '0'],
      ...['--schedulers', schedulers.join(',')],
      ...['--principal-concurrency-max', String(IDLE_SESSIONS + 1000)],
    ],
    { wrapper: RAISE_FD_LIMIT, env: GATEWAY_ENV },
  );
  extra.push(gateway);
  const target: Target = { name: 'idle', url: `http://127.0.0.1:${gateway.port}/mcp`, headers: {} };
  const pool = new Pool(new URL(target.url).origin, { connections: IDLE_SESSIONS + IDLE_BATCH });
  try {
    const {
      start,
      last,
      perStreamBytes: perStream,
    } = await rssSteps(
      gateway.pid,
      (from, to) => holdIdleStreams(pool, target, from, to),
      (point) => progress(`gateway RSS ${(point.rss / 2 ** 20).toFixed(0)} MB with ${point.streams} idle GET streams`),
    );
    const measured = last.streams >= IDLE_TARGET;
    return [
      { metric: 'idle_sessions', value: IDLE_SESSIONS, unit: 'sessions' },
      { metric: 'gateway_rss_start', value: start.rss / 2 ** 20, unit: 'MB' },
      { metric: 'gateway_rss_idle_sessions', value: last.rss / 2 ** 20, unit: 'MB' },
      { metric: 'gateway_rss_per_idle_stream', value: perStream / 1024, unit: 'KiB' },
      {
        metric: measured ? 'gateway_rss_10k_idle_sessions' : 'gateway_rss_10k_idle_sessions_extrapolated',
        value: (last.rss + perStream * (IDLE_TARGET - last.streams)) / 2 ** 20,
        unit: 'MB',
      },
    ];
  } finally {
    await pool.destroy();
  }
}

async function main(): Promise<void> {
  warmCompileCache();
  const cluster = await startCluster({
    schedulers: 1,
    runtimes: 1,
    // Gateways are started here, with GATEWAY_ENV.
    gateways: 0,
    // The production default: the bench measures traffic, not liveness, and
    // the test default (300 ms) drops healthy tunnels on a loaded machine.
    tunnelPingIntervalMs: 5000,
    runtimeArgs: [
      '--direct-listen.enabled',
      'true',
      '--direct-listen.host',
      '127.0.0.1',
      '--direct-listen.token',
      TOKEN,
    ],
  });
  const extra: Stoppable[] = [];
  try {
    const runtime = cluster.runtimes[0]!;
    const ready = await runtime.waitForLog((l) => l.msg === 'ready');
    const directUrl = String(ready.direct);
    const gatewayArgs = ['--host', '127.0.0.1', '--port', '0', '--default-class', 'demo', '--drain-delay-ms', '0'];
    const schedulers = ['--schedulers', cluster.schedulerUrls().join(',')];
    const direct = await spawnApp(
      'gateway',
      'g-direct',
      [...gatewayArgs, ...schedulers, '--upstream-mode', 'direct', '--upstream-token', TOKEN],
      { env: GATEWAY_ENV },
    );
    extra.push(direct);
    const tunnel = await spawnApp('gateway', 'g-tunnel', [...gatewayArgs, ...schedulers], { env: GATEWAY_ENV });
    extra.push(tunnel);
    const passthrough = await startChildServer('passthrough.ts', [new URL(directUrl).origin]);
    extra.push(passthrough);
    const directHeaders = { authorization: `Bearer ${TOKEN}`, 'x-switchyard-class': 'demo' };
    const targets: Target[] = [
      { name: 'runtime direct', url: `${directUrl}/mcp`, headers: directHeaders },
      { name: 'bare passthrough', url: `http://127.0.0.1:${passthrough.port}/mcp`, headers: directHeaders },
      { name: 'gateway direct mode', url: `http://127.0.0.1:${direct.port}/mcp`, headers: {} },
      { name: 'gateway tunnel mode', url: `http://127.0.0.1:${tunnel.port}/mcp`, headers: {} },
      // What the tunnel-mode gateway sends on, less what only it asserts (the
      // runtime takes the session id as the process, as behind the gateway).
      {
        name: 'scheduler proxy',
        url: `${cluster.schedulerUrls()[0]}/api/proxy/${encodeURIComponent(runtime.name)}/mcp`,
        headers: { 'x-switchyard-class': 'demo' },
      },
      // The same on relay connections, which the tunnel-mode gateway uses for its POSTs.
      {
        name: 'scheduler relay',
        url: `${cluster.schedulerUrls()[0]}/mcp`,
        relay: `${cluster.schedulerUrls()[0]}/api/relay/${encodeURIComponent(runtime.name)}`,
        headers: { 'x-switchyard-class': 'demo' },
      },
    ];
    const figures: Figure[] = [];
    const loops = new Map<string, Loop>();
    for (const c of CONCURRENCIES) {
      for (const [name, loop] of await measureAll(targets, c)) {
        loops.set(`${name}/${c}`, loop);
        progress(
          `${name} c=${c}: p50 ${loop.p50Ms.toFixed(3)} ms, p99 ${loop.p99Ms.toFixed(3)} ms, ${loop.rps.toFixed(0)} req/s`,
        );
        const key = name.replaceAll(' ', '_');
        figures.push(
          { metric: `${key}_c${c}_p50`, value: loop.p50Ms, unit: 'ms' },
          { metric: `${key}_c${c}_p99`, value: loop.p99Ms, unit: 'ms' },
          { metric: `${key}_c${c}_throughput`, value: loop.rps, unit: 'req/s' },
        );
      }
    }
    /** How much longer lane `slower` took than lane `faster` at p50, concurrency 1. */
    const p50Gap = (metric: string, slower: string, faster: string): Figure => ({
      metric,
      value: loops.get(`${slower}/1`)!.p50Ms - loops.get(`${faster}/1`)!.p50Ms,
      unit: 'ms',
    });
    /** Lane `lane`'s throughput at concurrency 32 as a share of the runtime's own. */
    const throughputRatio = (metric: string, lane: string): Figure => ({
      metric,
      value: loops.get(`${lane}/32`)!.rps / loops.get('runtime direct/32')!.rps,
      unit: 'ratio',
    });
    figures.push(
      p50Gap('direct_mode_added_p50_c1', 'gateway direct mode', 'runtime direct'),
      p50Gap('passthrough_added_p50_c1', 'bare passthrough', 'runtime direct'),
      // The gateway's own work: its hop less the leanest plain hop, measured alike.
      p50Gap('direct_mode_over_passthrough_p50_c1', 'gateway direct mode', 'bare passthrough'),
      p50Gap('tunnel_mode_added_p50_c1', 'gateway tunnel mode', 'runtime direct'),
      // The tunnel-mode path split in two: the scheduler's hop with the tunnel, and the gateway's hop before it.
      p50Gap('scheduler_proxy_added_p50_c1', 'scheduler proxy', 'runtime direct'),
      p50Gap('tunnel_mode_over_scheduler_proxy_p50_c1', 'gateway tunnel mode', 'scheduler proxy'),
      // The same split on the path the gateway takes (relay connections).
      p50Gap('scheduler_relay_added_p50_c1', 'scheduler relay', 'runtime direct'),
      p50Gap('tunnel_mode_over_scheduler_relay_p50_c1', 'gateway tunnel mode', 'scheduler relay'),
      throughputRatio('direct_mode_throughput_ratio_c32', 'gateway direct mode'),
      throughputRatio('tunnel_mode_throughput_ratio_c32', 'gateway tunnel mode'),
    );
    figures.push(...(await idleFigures(cluster, extra)));
    const baseline = await idleBaseline();
    figures.push(...baseline);
    const perStream = (name: string): number => figures.find((f) => f.metric === name)!.value;
    figures.push({
      metric: 'gateway_vs_baseline_per_idle_stream',
      value: perStream('gateway_rss_per_idle_stream') / perStream('baseline_rss_per_idle_stream'),
      unit: 'ratio',
    });
    report('gateway', figures);
  } catch (error) {
    reportTrouble([...cluster.schedulers, ...cluster.runtimes, ...extra]);
    throw error;
  } finally {
    await Promise.all(extra.map((p) => p.stop(2000)));
    await cluster.stop();
  }
}

await main();
