// A request no runtime can take is answered 503 and warned of. Gateways ask
// again and again for the same sessions (each waits out a redialling
// runtime), and their clients pick the class: a fleet that is full, or a
// class nobody serves, must not cost a warning per request. The replica
// warns once per reason per interval, with the count it held back, and
// logs every one at debug.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { SchedulerReplica } from '@switchyard/scheduler';
import { MemoryLeaseStore } from '@switchyard/election';
import type { RuntimeNode } from '@switchyard/runtime';
import { startReplicas, startRuntime, until } from './support.ts';

const REQUESTS = 20;

interface Line {
  readonly level: string;
  readonly obj: Record<string, unknown>;
  readonly msg: string | undefined;
}

/** A replica with no runtime, past its first epoch, logging into `logged`. */
function replicaLogging(): { logged: Line[]; start(): Promise<SchedulerReplica> } {
  const logged: Line[] = [];
  const at = (level: string) => (obj: object, msg?: string) =>
    void logged.push({ level, obj: obj as Record<string, unknown>, msg });
  const logger = { debug: at('debug'), info: at('info'), warn: at('warn'), error: at('error') };
  return {
    logged,
    async start() {
      const replica = (await startReplicas(1, new MemoryLeaseStore(), logger))[0]!;
      await until('an epoch', async () => {
        const res = await fetch(`${replica.url}/api/epoch`);
        return ((await res.json()) as { epoch: number | null }).epoch !== null || undefined;
      });
      return replica;
    },
  };
}

function schedule(replica: SchedulerReplica, body: object): Promise<Response> {
  return fetch(`${replica.url}/api/schedule`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ processId: 'p', ...body }),
  });
}

const unschedulable = (logged: readonly Line[]): Line[] => logged.filter((l) => l.msg === 'unschedulable');

describe('an unschedulable request', () => {
  const { logged, start } = replicaLogging();
  let replica: SchedulerReplica;
  before(async () => (replica = await start()));
  after(() => replica?.close());

  it('is warned of, and an unschedulable explain (a dry run) is logged at debug only', async () => {
    assert.equal((await schedule(replica, { class: 'nope', explain: true })).status, 503);
    assert.deepEqual(
      unschedulable(logged).map((l) => l.level),
      ['debug'],
    );
    assert.equal((await schedule(replica, { class: 'nope' })).status, 503);
    assert.deepEqual(
      unschedulable(logged).map((l) => l.level),
      ['debug', 'warn'],
    );
  });
});

describe(`${REQUESTS} unschedulable requests, each of a class no runtime serves`, () => {
  const { logged, start } = replicaLogging();
  let replica: SchedulerReplica;
  before(async () => (replica = await start()));
  after(() => replica?.close());

  it('are warned of once, and each logged at debug', async () => {
    for (let i = 0; i < REQUESTS; i++) assert.equal((await schedule(replica, { class: `nobody-${i}` })).status, 503);
    const lines = unschedulable(logged);
    const warned = lines.filter((l) => l.level !== 'debug');
    assert.equal(warned.length, 1, JSON.stringify(warned));
    assert.equal(warned[0]!.level, 'warn');
    assert.equal(warned[0]!.obj.class, 'nobody-0');
    assert.equal((warned[0]!.obj.reason as { code?: string }).code, 'no_runtime_for_class');
    assert.equal(lines.filter((l) => l.level === 'debug').length, REQUESTS - 1);
  });
});

// A gateway that could not start a sandbox on the only runtime of a class asks again excluding it: that
// every candidate is excluded is the gateway's own doing (it warns of the failed start), no cluster problem.
describe('unschedulable requests whose every candidate the request itself excludes', () => {
  const { logged, start } = replicaLogging();
  let replica: SchedulerReplica;
  let runtime: RuntimeNode;
  before(async () => {
    replica = await start();
    runtime = await startRuntime('rt-only', replica.url);
    await until('an epoch listing rt-only as available', async () => {
      const res = await fetch(`${replica.url}/api/runtimes`);
      const { runtimes } = (await res.json()) as { runtimes: { id: string; available: boolean }[] };
      return runtimes.some((r) => r.id === 'rt-only' && r.available) || undefined;
    });
  });
  after(async () => {
    await runtime?.close();
    await replica?.close();
  });

  it('are logged at debug only, while a class with no runtime is still warned of', async () => {
    for (let i = 0; i < 3; i++) {
      const res = await schedule(replica, { class: 'demo', exclude: ['rt-only'] });
      assert.equal(res.status, 503);
      const { unschedulable: reason } = (await res.json()) as { unschedulable: { code: string } };
      assert.equal(reason.code, 'all_excluded');
    }
    assert.deepEqual(
      unschedulable(logged).map((l) => l.level),
      ['debug', 'debug', 'debug'],
    );
    assert.equal((await schedule(replica, { class: 'nope' })).status, 503);
    assert.equal(unschedulable(logged).at(-1)!.level, 'warn');
  });
});
