// Soak: sessions are opened and closed continuously through the gateway of a
// process cluster while the memory of every process is sampled: RSS from
// /proc and the V8 heap from each app's /metrics. After a warm-up no
// process's heap floor may rise by more than HEAP_FLOOR_GROWTH_BYTES_MAX
// between the first and the second half of the run; in runs of at least
// RSS_JUDGED_FROM_SECONDS the RSS bound below applies as well.
//
// Heap bound: the rise of the lowest heap sample (see heap.ts). In long runs
// major collections happen throughout, so the floor tracks the live heap:
// 16 MB, a leak above ~0.5 KB per session at the ten-minute run's rate. In a
// 60 s run a scheduler that carries every proxied request through its
// tunnels may see no major collection in the second half, and the floor then
// includes old-space garbage: measured up to 54 MB with no leak (the same
// process's floor fell by 18 MB in another run). The short run therefore
// allows 96 MB — it still catches a leak above ~50 KB per session.
//
// RSS is judged only in long runs: in the first ~1,000 sessions RSS climbs to
// a plateau while V8 sizes its heap for the load (measured below), so a 60 s
// run ends mid-climb whatever the code does.
//
// Bound: 40 MB of late growth — the maximum RSS of the second half of the
// post-warm-up window over the maximum of its first half. Not growth over the
// post-warm-up minimum: measured here, a scheduler+runtime process serving
// 3,000 sessions kept a flat heap after GC (33 → 42 MB heapUsed) while its
// RSS climbed from 160 MB to a plateau of 380 MB over the first ~1,000
// sessions (V8 heap capacity and allocator arenas sized for the load) and then
// stayed there. A min-based bound fails on that plateau at any run length; a
// leak keeps growing in the second half, which this bound catches. 40 MB is
// above the 10–25 MB a quiet Node process swings through GC; at the 10-minute
// run's 20–30 sessions a second (about 8,000 sessions in the judged second
// half) it flags a leak of about 5 KB per session, at the 60 s run's rate
// about 150 KB per session. Every call must succeed, too.
//
// SOAK_SECONDS (default 60) sets the duration; `npm run soak` runs 600.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { startCluster, type TestCluster } from '../support/cluster.ts';
import { connectLegacy, endSession, textOf } from '../chaos/clients.ts';
import { growthAfter, sampleRss } from './rss.ts';
import { floorGrowthAfter, sampleHeap } from './heap.ts';

const SOAK_SECONDS = Number(process.env.SOAK_SECONDS ?? 60);
const WARMUP_MS = 15_000;
const RSS_GROWTH_BYTES_MAX = 40 * 1024 * 1024;
const RSS_JUDGED_FROM_SECONDS = 300;
const HEAP_FLOOR_GROWTH_BYTES_MAX = (SOAK_SECONDS >= RSS_JUDGED_FROM_SECONDS ? 16 : 96) * 1024 * 1024;
/** Concurrent open/close loops; each session does a few calls, then closes (DELETE). */
const LOOPS = 4;
const CALLS_PER_SESSION = 3;
/** Sandboxes are reused across sessions (as real clients reuse a workspace), so the runtime's sandbox cap is never the limit. */
const PROCESS_IDS = 8;
const MB = 1024 * 1024;

if (!Number.isFinite(SOAK_SECONDS) || SOAK_SECONDS < 20) throw new Error('SOAK_SECONDS must be a number ≥ 20');

describe(`soak: ${SOAK_SECONDS} s of sessions opened and closed through the gateway`, () => {
  let cluster: TestCluster;
  before(async () => {
    // 1 s tunnel liveness, as in the chaos suite: the harness's 300 ms drops healthy tunnels whenever a loaded machine stalls an event loop, which would be charged to the soak as failed sessions.
    cluster = await startCluster({ schedulers: 3, runtimes: 2, gateways: 1, tunnelPingIntervalMs: 1000 });
  });
  after(() => cluster?.stop());

  it(
    'keeps every process within its memory bound after the warm-up and fails no session',
    { timeout: (SOAK_SECONDS + 60) * 1000 },
    async () => {
      const processes = [...cluster.schedulers, ...cluster.runtimes, ...cluster.gateways].map((p) => ({
        name: p.name,
        pid: p.pid,
      }));
      const sampler = sampleRss(processes, 1000);
      const scheduler = cluster.schedulers[0]!.url!;
      const heapSampler = sampleHeap([
        ...cluster.schedulers.map((s) => ({ name: s.name, metricsUrl: `${s.url}/metrics` })),
        ...cluster.runtimes.map((r) => ({ name: r.name, metricsUrl: `${scheduler}/api/proxy/${r.name}/metrics` })),
        ...cluster.gateways.map((g) => ({ name: g.name, metricsUrl: `http://127.0.0.1:${g.port}/metrics` })),
      ]);
      const deadline = performance.now() + SOAK_SECONDS * 1000;
      const failures: string[] = [];
      const stats = { sessions: 0, calls: 0 };
      const loop = async (loopIndex: number): Promise<void> => {
        for (let n = 0; performance.now() < deadline; n++) {
          const processId = `soak-${(loopIndex + n) % PROCESS_IDS}`;
          try {
            const client = await connectLegacy(cluster.gatewayUrl(), { 'x-switchyard-process': processId });
            try {
              for (let c = 0; c < CALLS_PER_SESSION; c++) {
                const text = textOf(
                  await client.callTool({ name: 'echo', arguments: { text: `${loopIndex}:${n}:${c}` } }),
                );
                if (text !== `${loopIndex}:${n}:${c}`) failures.push(`loop ${loopIndex} echoed ${text}`);
                stats.calls++;
              }
            } finally {
              // DELETE, so the gateway and runtime free the session now, not at idle expiry.
              await endSession(client);
            }
            stats.sessions++;
          } catch (error) {
            if (failures.length < 50) failures.push(`loop ${loopIndex} session ${n}: ${(error as Error).message}`);
          }
        }
      };
      await Promise.all(Array.from({ length: LOOPS }, (_, i) => loop(i)));
      const series = sampler.stop();
      const heap = floorGrowthAfter(heapSampler.stop(), WARMUP_MS);
      const growth = growthAfter(series, WARMUP_MS);
      for (const h of heap) {
        console.log(
          `soak heap ${h.name}: floor ${(h.firstFloorBytes / MB).toFixed(1)} → ${(h.secondFloorBytes / MB).toFixed(1)} MB`,
        );
      }
      for (const g of growth) {
        console.log(
          `soak rss ${g.name}: min ${(g.minAfterWarmupBytes / MB).toFixed(1)} MB, max ${(g.maxAfterWarmupBytes / MB).toFixed(1)} MB, ` +
            `last ${(g.lastBytes / MB).toFixed(1)} MB, growth over min ${(g.growthBytes / MB).toFixed(1)} MB, ` +
            `late growth ${(g.lateGrowthBytes / MB).toFixed(1)} MB; profile ${g.profileBytes.map((b) => (b / MB).toFixed(0)).join(' ')} MB`,
        );
      }
      console.log(
        `soak: ${stats.sessions} sessions, ${stats.calls} calls in ${SOAK_SECONDS} s ` +
          `(${(stats.sessions / SOAK_SECONDS).toFixed(1)} sessions/s), ${failures.length} failures`,
      );
      assert.deepEqual(failures, []);
      assert.ok(stats.sessions >= SOAK_SECONDS, `too few sessions to judge: ${stats.sessions}`);
      assert.deepEqual(
        heap
          .filter((h) => h.floorGrowthBytes > HEAP_FLOOR_GROWTH_BYTES_MAX)
          .map((h) => `${h.name} heap floor rose ${(h.floorGrowthBytes / MB).toFixed(1)} MB`),
        [],
        `heap bound: ${HEAP_FLOOR_GROWTH_BYTES_MAX / MB} MB rise of the heap floor`,
      );
      if (SOAK_SECONDS < RSS_JUDGED_FROM_SECONDS) return;
      const over = growth.filter((g) => g.lateGrowthBytes > RSS_GROWTH_BYTES_MAX);
      assert.deepEqual(
        over.map((g) => `${g.name} grew ${(g.lateGrowthBytes / MB).toFixed(1)} MB in the second half`),
        [],
        `RSS bound: ${RSS_GROWTH_BYTES_MAX / MB} MB of late growth`,
      );
    },
  );
});
