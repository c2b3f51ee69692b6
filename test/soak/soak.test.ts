// Soak: sessions are opened and closed continuously through the gateway of a
// process cluster while the RSS of every process is sampled from /proc. After
// a warm-up no process may grow beyond RSS_GROWTH_BYTES_MAX over its own
// post-warm-up minimum.
//
// Bound: 40 MB. A quiet Node process's RSS swings by 10–25 MB as V8 grows and
// shrinks its young generation and releases old-space pages lazily, so a
// tighter bound flags GC noise. A leak that matters is per session: this loop
// opens about 5–10 sessions a second on a shared 2-core machine, so the 60 s
// run (45 s judged) opens 300–600 and a leak of about 100 KB per session (a
// forgotten transport with its buffers) crosses the bound; the 10-minute run
// opens thousands, so about 10 KB per session does.
//
// SOAK_SECONDS (default 60) sets the duration; `npm run soak` runs 600.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { startCluster, type TestCluster } from '../support/cluster.ts';
import { connectLegacy, endSession, textOf } from '../chaos/clients.ts';
import { growthAfter, sampleRss } from './rss.ts';

const SOAK_SECONDS = Number(process.env.SOAK_SECONDS ?? 60);
const WARMUP_MS = 15_000;
const RSS_GROWTH_BYTES_MAX = 40 * 1024 * 1024;
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
    'keeps every process within the RSS bound after the warm-up and fails no session',
    { timeout: (SOAK_SECONDS + 60) * 1000 },
    async () => {
      const processes = [...cluster.schedulers, ...cluster.runtimes, ...cluster.gateways].map((p) => ({
        name: p.name,
        pid: p.pid,
      }));
      const sampler = sampleRss(processes, 1000);
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
      const growth = growthAfter(series, WARMUP_MS);
      for (const g of growth) {
        console.log(
          `soak rss ${g.name}: min ${(g.minAfterWarmupBytes / MB).toFixed(1)} MB, max ${(g.maxAfterWarmupBytes / MB).toFixed(1)} MB, ` +
            `last ${(g.lastBytes / MB).toFixed(1)} MB, growth ${(g.growthBytes / MB).toFixed(1)} MB`,
        );
      }
      console.log(
        `soak: ${stats.sessions} sessions, ${stats.calls} calls in ${SOAK_SECONDS} s ` +
          `(${(stats.sessions / SOAK_SECONDS).toFixed(1)} sessions/s), ${failures.length} failures`,
      );
      assert.deepEqual(failures, []);
      assert.ok(stats.sessions >= SOAK_SECONDS, `too few sessions to judge: ${stats.sessions}`);
      const over = growth.filter((g) => g.growthBytes > RSS_GROWTH_BYTES_MAX);
      assert.deepEqual(
        over.map((g) => `${g.name} grew ${(g.growthBytes / MB).toFixed(1)} MB`),
        [],
        `RSS bound ${RSS_GROWTH_BYTES_MAX / MB} MB over the post-warm-up minimum`,
      );
    },
  );
});
