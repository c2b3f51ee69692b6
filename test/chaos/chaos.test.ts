// Chaos on one process cluster: three schedulers electing through the fake
// Kubernetes Lease API, three runtimes (runtime rK dials scheduler sK; r2
// lives in its own network namespace when this runs as root), two gateways,
// and six SDK v2 legacy sessions calling `counter` throughout. Each scenario
// injects one fault, heals it and checks the invariants of scenario.ts and
// invariants.ts; killed components are restarted so the next scenario starts
// from a whole cluster. Recovery figures are printed as `chaos …` lines.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { startLeaseCluster, type LeaseCluster } from '../cluster/helpers.ts';
import type { AppProcess } from '../support/processes.ts';
import { until } from '../support/processes.ts';
import { InvariantSampler } from './invariants.ts';
import { SessionLoad } from './load.ts';
import { createPartition, netnsUnavailable, type Partition } from './netns.ts';
import { runScenario, type ChaosContext } from './scenario.ts';
import { initializeBody, scrape, seriesSum } from '../e2e/support.ts';

const SUITE_BUDGET_MS = 170_000;
const RUNTIMES = ['r0', 'r1', 'r2'];
/**
 * Tunnel liveness interval (and timeout). The harness default of 300 ms
 * drops a healthy tunnel whenever either end's event loop stalls for 300 ms,
 * which a loaded 2-core machine does; that loss would be charged to whatever
 * scenario runs at the time. One second still notices a dead runtime within
 * about two.
 */
const TUNNEL_PING_INTERVAL_MS = 1000;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const netnsSkip = netnsUnavailable();
if (netnsSkip) console.log(`chaos: the network-partition scenario is skipped: ${netnsSkip}`);

/**
 * While a scheduler replica is frozen (it takes connections, answers
 * nothing), new sessions through every gateway are placed by the other
 * replicas within a second: each gateway asks the frozen one at most once
 * (its ask waits for the hedge delay, not a timeout) and then asks it last.
 * Judged on the gateways' schedule latency, so a session that lands on a
 * runtime behind the frozen replica (it then waits, whatever the gateway
 * does) does not count against it.
 */
async function newSessionsAskAround(lc: LeaseCluster): Promise<void> {
  const SESSIONS = 6;
  const bases = [0, 1].map((g) => lc.cluster.gatewayUrl(g).replace(/\/mcp$/, ''));
  // Placements so far and those within 1 s, from one scrape per gateway: read apart, a placement
  // made between the two reads (the load's sessions go on) is counted in one and not the other.
  const placed = async (): Promise<[count: number, within: number]> => {
    const texts = await Promise.all(bases.map(scrape));
    const sum = (read: (text: string) => number) => texts.reduce((total, text) => total + read(text), 0);
    return [
      sum((t) => seriesSum(t, 'switchyard_gateway_schedule_duration_seconds_count', { outcome: 'ok' })),
      sum((t) => seriesSum(t, 'switchyard_gateway_schedule_duration_seconds_bucket', { le: '1', outcome: 'ok' })),
    ];
  };
  const [countBefore, withinBefore] = await placed();
  const since = Date.now();
  for (let i = 0; i < SESSIONS; i++) {
    // Whether the session answers in time is the scenario's concern; only its placement is judged here.
    await fetch(lc.cluster.gatewayUrl(i % 2), {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
      body: JSON.stringify(initializeBody()),
      signal: AbortSignal.timeout(1000),
    })
      .then((res) => res.body?.cancel())
      .catch(() => undefined);
  }
  const [countAfter, withinAfter] = await placed();
  const [count, within] = [countAfter - countBefore, withinAfter - withinBefore];
  assert.ok(count >= SESSIONS, `placed ${count} of ${SESSIONS} new sessions while a replica was frozen`);
  if (within !== count) {
    // What each gateway warned of meanwhile, for a failure seen only under load.
    const warnings = lc.cluster.gateways.flatMap((g, i) =>
      g.logs.flatMap((l) => (Number(l.time) >= since && Number(l.level) >= 40 ? [`g${i}: ${l.msg}`] : [])),
    );
    assert.fail(`${count - within} of ${count} placements took over 1 s; gateways warned: ${JSON.stringify(warnings)}`);
  }
}

describe('chaos: one cluster, steady load, one fault at a time', () => {
  let lc: LeaseCluster;
  let ctx: ChaosContext;
  let partition: Partition | undefined;
  let r2Url: string | undefined;
  let load: SessionLoad;
  let sampler: InvariantSampler;

  const schedulerIndex = async (leader: boolean): Promise<number> => {
    const l = await lc.cluster.leader();
    const i = lc.cluster.schedulers.indexOf(l);
    return leader ? i : (i + 1) % 3;
  };
  const runtime = (id: string): AppProcess => lc.cluster.runtimes.filter((r) => r.name === id).at(-1)!;
  const startRuntime = (id: string): Promise<AppProcess> =>
    id === 'r2' && partition
      ? lc.cluster.startRuntime('r2', 2, { schedulerUrl: r2Url!, wrapper: partition.wrapper })
      : lc.cluster.startRuntime(id, Number(id.slice(1)));
  /** The runtime (of r0, r1) hosting the most sessions, so a runtime loss always hits someone. */
  const busiestRuntime = (): string => {
    const count = (id: string) => load.sessions.filter((s) => s.runtime === id).length;
    return count('r0') >= count('r1') ? 'r0' : 'r1';
  };

  before(async () => {
    lc = await startLeaseCluster({
      schedulers: 3,
      runtimes: 0,
      gateways: 2,
      tunnelPingIntervalMs: TUNNEL_PING_INTERVAL_MS,
    });
    if (!netnsSkip) {
      try {
        partition = createPartition();
        r2Url = await partition.forward(lc.cluster.schedulers[2]!.port!);
        console.log(`chaos: r2 runs in a network namespace; partitions are cut by ${partition.method}`);
      } catch (error) {
        console.log(`chaos: no network namespace (${(error as Error).message.split('\n')[0]}); r2 runs on loopback`);
        await partition?.close();
        partition = undefined;
      }
    }
    // Side by side: each dials a replica of its own, and one at a time their start-ups added up.
    await Promise.all(RUNTIMES.map((id) => startRuntime(id)));
    await lc.cluster.waitForRuntimes(RUNTIMES, 20_000);
    load = new SessionLoad({
      gatewayUrl: (i) => lc.cluster.gatewayUrl(i),
      gateways: 2,
      sessions: 6,
      deadlineMs: performance.now() + SUITE_BUDGET_MS,
      callsMax: 50_000,
      pauseMs: 25,
      callTimeoutMs: 5000,
    });
    sampler = new InvariantSampler(() => lc.cluster.schedulerUrls());
    load.start();
    sampler.start();
    ctx = { lc, load, sampler, ownerOf: (id) => Number(id.slice(1)), runtimeIds: RUNTIMES };
  });

  after(async () => {
    await load?.stop();
    await sampler?.stop();
    await lc?.close();
    await partition?.close();
    if (load) {
      const calls = load.sessions.reduce((n, s) => n + s.calls, 0);
      console.log(
        `chaos: ${calls} counter calls, ${load.errors.length} failed, ${load.recoveries.length} re-initializations; ` +
          `${sampler.samples} epoch samples, ${sampler.comparisons} snapshot comparisons over ${sampler.hashes.size} epochs`,
      );
    }
  });

  // First, while the load's sessions are still spread over all three runtimes: later faults move r2's away.
  it(
    'a runtime whose connections a NAT in between forgets (packets dropped, new connections pass) keeps its sessions',
    { skip: netnsSkip },
    async (t) => {
      if (!partition?.forget) return t.skip('needs a network namespace and nftables');
      await runScenario(ctx, {
        name: 'r2 forgotten (nftables)',
        victims: { runtimes: ['r2'] },
        keepsSessions: true,
        inject: async () => {
          const r2 = lc.cluster.runtimes.findLast((r) => r.name === 'r2')!;
          const forgottenAt = Date.now();
          partition!.forget!();
          // r2 finds the silence by its pings (every 1 s, 1 s timeout) and dials again, through the NAT anew.
          await r2.waitForLog((l) => l.msg === 'tunnel connected' && Number(l.time) >= forgottenAt, 10_000);
        },
        heal: async () => partition!.heal(),
      });
    },
  );

  it('kill -9 of the leader: another replica leads, sessions elsewhere see nothing', async () => {
    const i = await schedulerIndex(true);
    const victim = lc.cluster.schedulers[i]!;
    await runScenario(ctx, {
      name: 'kill leader',
      victims: { schedulers: [i] },
      inject: async () => {
        const t = performance.now();
        victim.signal('SIGKILL');
        await victim.exited;
        const next = await lc.cluster.leader();
        console.log(
          `chaos kill leader: ${next.name} leads ${((performance.now() - t) / 1000).toFixed(2)} s after the kill`,
        );
        assert.notEqual(next, victim);
      },
      heal: async () => void (await lc.cluster.restartScheduler(i)),
    });
  });

  it('SIGSTOP of the leader past its lease: a successor leads; after SIGCONT the old leader steps down', async () => {
    const i = await schedulerIndex(true);
    const victim = lc.cluster.schedulers[i]!;
    await runScenario(ctx, {
      name: 'stop leader',
      victims: { schedulers: [i] },
      inject: async () => {
        victim.signal('SIGSTOP');
        await until('a successor', async () => ((await lc.cluster.leader()) !== victim ? true : undefined), 15_000);
      },
      heal: async () => victim.signal('SIGCONT'),
    });
  });

  it('kill -9 of a follower: its runtime is lost until it returns; everything else is untouched', async () => {
    const i = await schedulerIndex(false);
    await runScenario(ctx, {
      name: 'kill follower',
      victims: { schedulers: [i] },
      inject: async () => {
        lc.cluster.schedulers[i]!.signal('SIGKILL');
        await lc.cluster.schedulers[i]!.exited;
      },
      heal: async () => void (await lc.cluster.restartScheduler(i)),
    });
  });

  it('SIGSTOP/SIGCONT of a follower for 3 s: new sessions are placed around it', async () => {
    const i = await schedulerIndex(false);
    const victim = lc.cluster.schedulers[i]!;
    await runScenario(ctx, {
      name: 'stop follower',
      victims: { schedulers: [i] },
      inject: async () => {
        const stopped = performance.now();
        victim.signal('SIGSTOP');
        await newSessionsAskAround(lc);
        await sleep(3000 - (performance.now() - stopped));
      },
      heal: async () => victim.signal('SIGCONT'),
    });
  });

  it('kill -9 of a gateway: its clients re-initialize through the other one', async () => {
    await runScenario(ctx, {
      name: 'kill gateway',
      victims: { gateways: [1] },
      inject: async () => {
        lc.cluster.gateways[1]!.signal('SIGKILL');
        await lc.cluster.gateways[1]!.exited;
        await sleep(1000);
      },
      heal: async () => void (await lc.cluster.restartGateway(1)),
    });
  });

  it('SIGSTOP/SIGCONT of a gateway for 2 s', async () => {
    const victim = lc.cluster.gateways[0]!;
    await runScenario(ctx, {
      name: 'stop gateway',
      victims: { gateways: [0] },
      inject: async () => {
        victim.signal('SIGSTOP');
        await sleep(2000);
      },
      heal: async () => victim.signal('SIGCONT'),
    });
  });

  it('kill -9 of a runtime: its sessions get 404 and re-initialize elsewhere', async () => {
    const id = busiestRuntime();
    await runScenario(ctx, {
      name: `kill runtime ${id}`,
      victims: { runtimes: [id] },
      expect404: true,
      inject: async () => {
        runtime(id).signal('SIGKILL');
        await runtime(id).exited;
        await until(
          'the sessions to leave it',
          () => !load.sessions.some((s) => s.runtime === id) || undefined,
          15_000,
        );
      },
      heal: async () => void (await startRuntime(id)),
    });
  });

  it('SIGSTOP/SIGCONT of a runtime for 3 s: its tunnel is dropped, its sessions move', async () => {
    const id = busiestRuntime();
    const victim = runtime(id);
    await runScenario(ctx, {
      name: `stop runtime ${id}`,
      victims: { runtimes: [id] },
      inject: async () => {
        const stopped = performance.now();
        victim.signal('SIGSTOP');
        await newSessionsAskAround(lc);
        await sleep(3000 - (performance.now() - stopped));
      },
      heal: async () => victim.signal('SIGCONT'),
    });
  });

  it(
    'a runtime cut off the network (namespace + packet drop) is lost, then rejoins',
    { skip: netnsSkip },
    async (t) => {
      if (!partition) return t.skip('no network namespace could be created');
      await runScenario(ctx, {
        name: `partition r2 (${partition.method})`,
        victims: { runtimes: ['r2'] },
        inject: async () => {
          partition!.cut();
          await sleep(3000);
        },
        heal: async () => partition!.heal(),
      });
    },
  );

  it('Lease API faults (500s, slow answers, 409 storms): elections churn at most, sessions see nothing', async () => {
    await runScenario(ctx, {
      name: 'lease faults',
      victims: {},
      inject: async () => {
        lc.fake.setFaults({ failNext: 12, failStatus: 500 });
        await sleep(2000);
        lc.fake.setFaults({ delayMs: 2500 });
        await sleep(3000);
        lc.fake.setFaults({ delayMs: 0, conflictNext: 30 });
        await sleep(2000);
        const statuses = new Set(lc.fake.requests().map((r) => r.status));
        assert.ok(statuses.has(500) && statuses.has(409), `faults were served: ${[...statuses].join(',')}`);
      },
      heal: async () => lc.fake.resetFaults(),
    });
  });
});
