// The frame every chaos scenario runs in: note where each session lives,
// inject the fault, heal it, wait until the cluster is whole again, then
// judge. "Unaffected" is precise: a session whose sandbox lives on a runtime
// that was not a victim, whose runtime's tunnel is held by a scheduler that
// was not a victim, and which talks through a gateway that was not a victim.
// Such a session must see no error at all while the scenario runs.
import assert from 'node:assert/strict';
import type { LeaseCluster } from '../cluster/helpers.ts';
import { availableRuntimes } from '../support/cluster.ts';
import { until } from '../support/processes.ts';
import type { InvariantSampler } from './invariants.ts';
import type { SessionLoad } from './load.ts';

export interface Victims {
  readonly schedulers?: readonly number[];
  readonly gateways?: readonly number[];
  readonly runtimes?: readonly string[];
}

export interface ChaosContext {
  readonly lc: LeaseCluster;
  readonly load: SessionLoad;
  readonly sampler: InvariantSampler;
  /** Runtime id → index of the scheduler whose URL it dials (the owner of its tunnel). */
  readonly ownerOf: (runtime: string) => number;
  readonly runtimeIds: readonly string[];
}

export interface ScenarioSpec {
  readonly name: string;
  readonly victims: Victims;
  /** Injects the fault; resolves once it is in effect. */
  readonly inject: () => Promise<void>;
  /** Undoes it (restart, SIGCONT, heal); resolves once done. */
  readonly heal: () => Promise<void>;
  /** Sessions on a lost runtime must have seen a 404 before re-initializing. */
  readonly expect404?: boolean;
  /**
   * Sessions on the victim runtimes keep their sandboxes: none re-initializes,
   * and each fails at most its calls in flight when the fault came.
   */
  readonly keepsSessions?: boolean;
  readonly recoveryTimeoutMs?: number;
}

/** The last tunnel and routing lines of every scheduler and gateway, to explain a failure. */
function recentLogs(ctx: ChaosContext): string {
  const procs = [...ctx.lc.cluster.schedulers, ...ctx.lc.cluster.gateways];
  return procs
    .flatMap((p) =>
      p.logs
        .filter((l) => /tunnel|runtime|route|proxy/i.test(String(l.msg)))
        .slice(-6)
        .map((l) => `${p.name}: ${JSON.stringify(l).slice(0, 300)}`),
    )
    .join('\n');
}

const seconds = (ms: number): string => `${(ms / 1000).toFixed(2)} s`;

async function leaders(ctx: ChaosContext): Promise<string[]> {
  const found: string[] = [];
  for (const s of ctx.lc.cluster.schedulers) {
    const res = await fetch(`${s.url}/api/epoch`, { signal: AbortSignal.timeout(1000) }).catch(() => undefined);
    const info = (await res?.json().catch(() => undefined)) as { isLeader?: boolean } | undefined;
    if (info?.isLeader) found.push(s.name);
  }
  return found;
}

/** Runs one scenario under the load and asserts its invariants; prints recovery figures. */
export async function runScenario(ctx: ChaosContext, spec: ScenarioSpec): Promise<void> {
  const { load, sampler } = ctx;
  const v = {
    schedulers: spec.victims.schedulers ?? [],
    gateways: spec.victims.gateways ?? [],
    runtimes: spec.victims.runtimes ?? [],
  };
  await until('every session healthy before the fault', () => load.allHealthySince(performance.now() - 2000), 15_000);
  const placement = load.sessions.map((s) => ({ index: s.index, runtime: s.runtime, gateway: s.gateway }));
  const unaffected = placement.filter(
    (p) =>
      !v.runtimes.includes(p.runtime) &&
      !v.schedulers.includes(ctx.ownerOf(p.runtime)) &&
      !v.gateways.includes(p.gateway),
  );
  const lostRuntime = placement.filter(
    (p) =>
      v.runtimes.includes(p.runtime) &&
      !v.gateways.includes(p.gateway) &&
      !v.schedulers.includes(ctx.ownerOf(p.runtime)),
  );
  const startMs = performance.now();
  const violationsBefore = { load: load.violations.length, sampler: sampler.violations.length };

  const injectedMs = performance.now();
  try {
    await spec.inject();
  } finally {
    // A scenario that fails while its fault holds must not leave it to the next ones.
    await spec.heal();
  }
  const healedMs = performance.now();
  await until(
    'every runtime back on every scheduler',
    async () => {
      const lists = await Promise.all(ctx.lc.cluster.schedulers.map((s) => availableRuntimes(s.url!)));
      return lists.every((l) => l.join(',') === [...ctx.runtimeIds].sort().join(',')) || undefined;
    },
    spec.recoveryTimeoutMs ?? 20_000,
  );
  const wholeMs = performance.now();
  await until('one leader', async () => ((await leaders(ctx)).length === 1 ? true : undefined), 10_000);
  await until('every session calling again', () => load.allHealthySince(healedMs), spec.recoveryTimeoutMs ?? 20_000);
  const endMs = performance.now();

  const recoveries = load.recoveries.filter((r) => r.atMs >= startMs);
  const errors = load.errorsBetween(startMs, endMs);
  console.log(
    `chaos ${spec.name}: fault held ${seconds(healedMs - injectedMs)}, cluster whole ${seconds(wholeMs - healedMs)} after healing, ` +
      `sessions all calling ${seconds(endMs - healedMs)} after healing; ${errors.length} failed calls, ` +
      `${recoveries.length} re-initializations` +
      (recoveries.length ? ` (longest outage ${seconds(Math.max(...recoveries.map((r) => r.downMs)))})` : ''),
  );

  const unaffectedErrors = errors.filter((e) => unaffected.some((u) => u.index === e.session));
  assert.deepEqual(
    unaffectedErrors.map((e) => `session ${e.session} on ${e.runtime} via g${e.gateway}: ${e.message.slice(0, 160)}`),
    [],
    `unaffected sessions (${unaffected.map((u) => u.index).join(',') || 'none'}) saw errors; recent logs:\n${recentLogs(ctx)}`,
  );
  const unaffectedMoved = recoveries.filter((r) => unaffected.some((u) => u.index === r.session));
  assert.deepEqual(unaffectedMoved, [], 'unaffected sessions re-initialized');
  if (spec.expect404) {
    for (const p of lostRuntime) {
      const r = recoveries.find((x) => x.session === p.index);
      assert.ok(r, `session ${p.index} on lost runtime ${p.runtime} never re-initialized`);
      const seen = errors.filter((e) => e.session === p.index).map((e) => e.message.slice(0, 200));
      assert.ok(
        r.saw404,
        `session ${p.index} on lost runtime ${p.runtime} re-initialized without a 404: ${seen.join(' | ')}`,
      );
    }
  }
  if (spec.keepsSessions) {
    const kept = placement.filter((p) => v.runtimes.includes(p.runtime));
    assert.ok(kept.length > 0, `no session on ${v.runtimes.join(', ')} to keep`);
    const moved = recoveries.filter((r) => kept.some((k) => k.index === r.session));
    assert.deepEqual(
      moved,
      [],
      `sessions on ${v.runtimes.join(', ')} re-initialized; recent logs:\n${recentLogs(ctx)}`,
    );
    for (const k of kept) {
      const failed = errors.filter((e) => e.session === k.index).map((e) => e.message.slice(0, 160));
      assert.ok(failed.length <= 1, `session ${k.index} on ${k.runtime}: ${failed.join(' | ')}`);
    }
  }
  assert.deepEqual(load.violations.slice(violationsBefore.load), [], 'a tool call executed twice or skipped');
  assert.deepEqual(sampler.violations.slice(violationsBefore.sampler), [], 'epoch invariants');
}
