// Acceptance: losing and regaining runtimes and schedulers, as OS processes
// (tunnel liveness pings every 300 ms). Two replicas elect through a FAKE
// Kubernetes Lease API (test/fakes) served by this test process and reached
// through the real @kubernetes/client-node: no API server can run here.
// r0 holds its tunnel on s0 and r1 on s1; requests go through s0, so r1's
// traffic also crosses the one-hop forward between replicas.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { TestCluster } from '../support/cluster.ts';
import { isAlive, startLeaseCluster } from './helpers.ts';
import { openSession, startSleep } from './mcp.ts';

const PING_MS = 300;
const ELECTION = { leaseDurationMs: 3000, renewDeadlineMs: 2000, retryPeriodMs: 500 };

interface RuntimeView {
  readonly status: number;
  readonly available?: boolean;
  readonly generation?: number;
  readonly processes?: string[];
  readonly threads?: Array<{ process: string; thread: string }>;
}

async function runtimeView(url: string, id: string): Promise<RuntimeView> {
  const res = await fetch(`${url}/api/runtime/${id}`, { signal: AbortSignal.timeout(2000) });
  if (res.status !== 200) return { status: res.status, ...((await res.json()) as object) };
  const body = (await res.json()) as {
    runtime: { available: boolean; generation: number };
    processes: string[];
    threads: Array<{ process: string; thread: string }>;
  };
  return {
    status: 200,
    available: body.runtime.available,
    generation: body.runtime.generation,
    processes: [...body.processes].sort(),
    threads: [...body.threads].sort((a, b) => `${a.process}/${a.thread}`.localeCompare(`${b.process}/${b.thread}`)),
  };
}

/** Polls until `probe` returns a value; `seen` describes the last state for the failure message. */
async function waitFor<T>(
  what: string,
  probe: () => Promise<T | undefined>,
  timeoutMs: number,
  seen: () => unknown = () => undefined,
): Promise<T> {
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    const value = await probe().catch((error: unknown) => void console.log(`# ${what}: ${String(error)}`));
    if (value !== undefined) return value;
    assert.ok(performance.now() < deadline, `${what}: not within ${timeoutMs} ms; last seen ${JSON.stringify(seen())}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

describe('runtime and scheduler loss on a two-replica cluster', () => {
  let cluster: TestCluster;
  let close: () => Promise<void>;
  before(async () => {
    ({ cluster, close } = await startLeaseCluster({
      schedulers: 2,
      runtimes: 2,
      gateways: 0,
      election: ELECTION,
      tunnelPingIntervalMs: PING_MS,
    }));
  });
  after(() => close?.());

  const via = (): string => cluster.schedulers[0]!.url!;
  const runtime = (id: string) => cluster.runtimes.filter((r) => r.name === id).at(-1)!;

  for (const { name, signal, boundMs } of [
    // The kernel closes a killed process's sockets: the tunnel dies at once.
    { name: 'kill -9', signal: 'SIGKILL' as const, boundMs: 3 * PING_MS },
    // A stopped process keeps its sockets open: only the missed pings tell.
    { name: 'SIGSTOP', signal: 'SIGSTOP' as const, boundMs: 3 * PING_MS + 500 },
  ]) {
    it(`fails in-flight proxied calls promptly, drops the runtime and answers 502 after a ${name} of it; a new instance re-registers`, async () => {
      const target = { scheduler: via(), runtime: 'r1', process: `inflight-${signal}` };
      const session = await openSession(target);
      const call = await startSleep(target, session, 20_000);
      assert.equal(call.status, 200);
      const victim = runtime('r1');
      const killedAt = performance.now();
      victim.signal(signal);
      try {
        const outcome = await call.done;
        const failedAfterMs = outcome.atMs - killedAt;
        const dropped = await waitFor(
          'r1 gone from the epoch on both replicas',
          async () => {
            const views = await Promise.all(cluster.schedulers.map((s) => runtimeView(s.url!, 'r1')));
            return views.every((v) => v.status === 404 || v.available === false) ? performance.now() : undefined;
          },
          5000,
        );
        const proxied = await fetch(`${via()}/api/proxy/r1/healthz`);
        const body = (await proxied.json()) as { runtime?: string };
        console.log(
          `# ${name}: in-flight call failed after ${failedAfterMs.toFixed(0)} ms, ` +
            `r1 dropped from every epoch after ${(dropped - killedAt).toFixed(0)} ms`,
        );
        assert.equal(outcome.ok, false, 'the in-flight call did not complete');
        assert.ok(failedAfterMs <= boundMs + 500, `in-flight call failed after ${failedAfterMs} ms`);
        assert.equal(proxied.status, 502);
        assert.equal(body.runtime, 'r1');
      } finally {
        if (signal === 'SIGSTOP') victim.signal('SIGCONT');
        await victim.stop(2000);
      }
      await cluster.startRuntime('r1', 1);
      await cluster.waitForRuntimes(['r0', 'r1'], 10_000);
      const health = await fetch(`${via()}/api/proxy/r1/healthz`);
      assert.equal(health.status, 200);
      await health.arrayBuffer();
    });
  }

  // The scheduler stops gracefully (the tunnel closes with 1000/1001), is gone for a while, and comes back on
  // its port; the runtime must keep dialling with backoff and republish its whole state on the new tunnel.
  it("keeps a runtime's processes and threads across a restart of its scheduler: it reconnects with backoff and republishes", async () => {
    const s0 = cluster.schedulers[0]!;
    const s1 = cluster.schedulers[1]!;
    const r0 = runtime('r0');
    for (const [process, sessions] of [
      ['keep-a', 2],
      ['keep-b', 1],
    ] as const) {
      for (let i = 0; i < sessions; i++) await openSession({ scheduler: s1.url!, runtime: 'r0', process });
    }
    const before = await waitFor(
      'r0 reporting its sessions',
      async () => {
        const view = await runtimeView(s1.url!, 'r0');
        return view.processes?.includes('keep-b') && view.threads!.length >= 3 ? view : undefined;
      },
      5000,
    );
    await s0.stop(3000);
    const restarted = await cluster.restartScheduler(0);
    const restartedAt = performance.now();
    let last: unknown;
    const after = await waitFor(
      'r0 republished on both replicas',
      async () => {
        const views = await Promise.all([restarted, s1].map((s) => runtimeView(s.url!, 'r0')));
        last = { before, views };
        return views.every((v) => v.available && v.generation! > before.generation!) ? views : undefined;
      },
      // Backoff doubles from 250 ms: attempts up to ~16 s after the drop cover a restart of that length.
      20_000,
      () => ({
        last,
        r0: runtime('r0')
          .logs.slice(-8)
          .map((l) => [l.msg, l.reason ?? l.status ?? l.err]),
        s0: restarted.logs.slice(-8).map((l) => [l.msg, l.err, l.runtime]),
      }),
    );
    console.log(`# r0 republished ${(performance.now() - restartedAt).toFixed(0)} ms after its scheduler came back`);
    for (const view of after) {
      assert.deepEqual(view.processes, before.processes);
      assert.deepEqual(view.threads, before.threads);
    }
    // The same process reconnected: it neither exited nor was replaced.
    assert.equal(runtime('r0'), r0);
    assert.ok(isAlive(r0), 'r0 is still running');
    const connects = r0.logs.filter((l) => l.msg === 'tunnel connected').length;
    assert.ok(connects >= 2, `r0 connected ${connects} times`);
  });
});
