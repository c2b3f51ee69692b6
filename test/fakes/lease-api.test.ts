// The fake Lease API driven by the REAL @kubernetes/client-node, and the
// election lib's Kubernetes lock and elector running against it.
import { after, afterEach, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { createInterface } from 'node:readline';
import { ApiException, CoordinationV1Api, KubeConfig, V1MicroTime } from '@kubernetes/client-node';
import type { V1Lease } from '@kubernetes/client-node';
import { ManualClock, flushMicrotasks } from '@switchyard/clock/testing';
import { LeaderElector, LeaseConflictError, createKubernetesLock, formatHolder } from '@switchyard/election';
import type { LeaseLock, LeaseRecord } from '@switchyard/election';
import { SwitchyardError } from '@switchyard/protocol';
import { startFakeLeaseApi } from './lease-api.ts';
import type { FakeLeaseApi } from './lease-api.ts';

const NS = 'switchyard';
const MICRO_TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$/;

function kubeConfigFor(url: string): KubeConfig {
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [{ name: 'fake', server: url, skipTLSVerify: true }],
    users: [{ name: 'fake' }],
    contexts: [{ name: 'fake', cluster: 'fake', user: 'fake' }],
    currentContext: 'fake',
  });
  return kc;
}

function leaseBody(name: string, renewTime: Date, resourceVersion?: string): V1Lease {
  return {
    metadata: { name, namespace: NS, ...(resourceVersion ? { resourceVersion } : {}) },
    spec: { holderIdentity: 'x@h:1', leaseDurationSeconds: 15, renewTime, acquireTime: renewTime, leaseTransitions: 0 },
  };
}

/** The HTTP status and Kubernetes Status reason of a failed client call. */
async function failure(call: Promise<unknown>): Promise<{ code: number; reason: string; kind: string }> {
  try {
    await call;
  } catch (error) {
    assert.ok(error instanceof ApiException, `not an ApiException: ${String(error)}`);
    const body = JSON.parse(error.body as string) as { reason: string; kind: string };
    return { code: error.code, reason: body.reason, kind: body.kind };
  }
  assert.fail('the call succeeded');
}

let fake: FakeLeaseApi;
let api: CoordinationV1Api;
before(async () => {
  fake = await startFakeLeaseApi();
  api = kubeConfigFor(fake.url).makeApiClient(CoordinationV1Api);
});
after(() => fake.close());
afterEach(() => fake.resetFaults());

describe('fake Lease API through the real client', () => {
  it('creates a lease with server metadata and returns MicroTime strings as written', async () => {
    const created = await api.createNamespacedLease({
      namespace: NS,
      body: leaseBody('create', new V1MicroTime(1_700_000_000_123)),
    });
    assert.equal(created.metadata?.name, 'create');
    assert.equal(created.metadata?.namespace, NS);
    assert.match(created.metadata?.uid ?? '', /^[0-9a-f-]{36}$/);
    assert.ok(created.metadata?.creationTimestamp);
    assert.match(created.metadata?.resourceVersion ?? '', /^\d+$/);
    const read = await api.readNamespacedLease({ name: 'create', namespace: NS });
    assert.equal(String(read.spec?.renewTime), '2023-11-14T22:13:20.123000Z');
    const listed = await api.listNamespacedLease({ namespace: NS });
    assert.ok(listed.items.some((l) => l.metadata?.name === 'create'));
  });

  const refused: Array<{ name: string; call: () => Promise<unknown>; code: number; reason: string }> = [
    {
      name: 'a missing lease is a 404 NotFound Status',
      call: () => api.readNamespacedLease({ name: 'absent', namespace: NS }),
      code: 404,
      reason: 'NotFound',
    },
    {
      name: 'a second create is a 409 AlreadyExists',
      call: () => api.createNamespacedLease({ namespace: NS, body: leaseBody('dup', new V1MicroTime()) }),
      code: 409,
      reason: 'AlreadyExists',
    },
    {
      name: 'a replace with a stale resourceVersion is a 409 Conflict',
      call: () =>
        api.replaceNamespacedLease({ name: 'dup', namespace: NS, body: leaseBody('dup', new V1MicroTime(), '1') }),
      code: 409,
      reason: 'Conflict',
    },
    {
      name: 'a plain Date (three fractional digits) is a 400, as the real server fails to decode it',
      call: () => api.createNamespacedLease({ namespace: NS, body: leaseBody('plain-date', new Date()) }),
      code: 400,
      reason: 'BadRequest',
    },
    {
      name: 'a replace of a missing lease is a 404',
      call: () =>
        api.replaceNamespacedLease({ name: 'absent', namespace: NS, body: leaseBody('absent', new V1MicroTime()) }),
      code: 404,
      reason: 'NotFound',
    },
    {
      name: 'a body naming another lease than the URL is a 400',
      call: () =>
        api.replaceNamespacedLease({ name: 'dup', namespace: NS, body: leaseBody('other', new V1MicroTime()) }),
      code: 400,
      reason: 'BadRequest',
    },
  ];
  for (const c of refused) {
    it(`answers with a Status: ${c.name}`, async () => {
      await api
        .createNamespacedLease({ namespace: NS, body: leaseBody('dup', new V1MicroTime()) })
        .catch(() => undefined);
      assert.deepEqual(await failure(c.call()), { code: c.code, reason: c.reason, kind: 'Status' });
    });
  }

  it('replaces with the current resourceVersion, keeping uid and creationTimestamp', async () => {
    const created = await api.createNamespacedLease({ namespace: NS, body: leaseBody('replace', new V1MicroTime()) });
    const rv = created.metadata!.resourceVersion!;
    const replaced = await api.replaceNamespacedLease({
      name: 'replace',
      namespace: NS,
      body: leaseBody('replace', new V1MicroTime(), rv),
    });
    assert.notEqual(replaced.metadata?.resourceVersion, rv);
    assert.equal(replaced.metadata?.uid, created.metadata?.uid);
    await api.deleteNamespacedLease({ name: 'replace', namespace: NS });
    assert.equal((await failure(api.readNamespacedLease({ name: 'replace', namespace: NS }))).code, 404);
  });

  it('injects N failures, then a 409 storm on writes, and logs every request', async () => {
    fake.setFaults({ failNext: 2, failStatus: 503 });
    for (let i = 0; i < 2; i++) assert.equal((await failure(api.listNamespacedLease({ namespace: NS }))).code, 503);
    await api.listNamespacedLease({ namespace: NS });
    fake.setFaults({ conflictNext: 3 });
    for (let i = 0; i < 3; i++) {
      const result = await failure(
        api.createNamespacedLease({ namespace: NS, body: leaseBody('storm', new V1MicroTime()) }),
      );
      assert.deepEqual(result, { code: 409, reason: 'Conflict', kind: 'Status' });
    }
    await api.createNamespacedLease({ namespace: NS, body: leaseBody('storm', new V1MicroTime()) });
    assert.deepEqual(
      fake.requests().map((r) => `${r.method} ${r.status}`),
      ['GET 503', 'GET 503', 'GET 200', 'POST 409', 'POST 409', 'POST 409', 'POST 201'],
    );
  });

  it('delays every request when told, through the HTTP control endpoint too', async () => {
    const set = await fetch(`${fake.url}/fake/faults`, { method: 'POST', body: JSON.stringify({ delayMs: 80 }) });
    assert.equal(set.status, 200);
    const startedMs = performance.now();
    await api.listNamespacedLease({ namespace: NS });
    assert.ok(performance.now() - startedMs >= 75);
    const log = (await (await fetch(`${fake.url}/fake/requests`)).json()) as { items: unknown[] };
    assert.equal(log.items.length, 1, 'control requests are not logged');
  });

  it('runs as a separate process that prints its URL and exits on SIGTERM', async () => {
    const child = spawn(process.execPath, [new URL('./lease-api.ts', import.meta.url).pathname], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    try {
      const [line] = (await once(createInterface({ input: child.stdout }), 'line')) as [string];
      assert.match(line, /^http:\/\/127\.0\.0\.1:\d+$/);
      const remote = kubeConfigFor(line).makeApiClient(CoordinationV1Api);
      await remote.createNamespacedLease({ namespace: NS, body: leaseBody('remote', new V1MicroTime()) });
      assert.equal((await remote.readNamespacedLease({ name: 'remote', namespace: NS })).spec?.holderIdentity, 'x@h:1');
    } finally {
      child.kill('SIGTERM');
    }
    const [code] = (await once(child, 'exit')) as [number | null];
    assert.equal(code, 0);
  });
});

describe('Kubernetes lease lock against the fake', () => {
  const record = (holder: string | undefined, at: number, resourceVersion?: string): LeaseRecord => ({
    holderIdentity: holder,
    leaseDurationSeconds: 15,
    acquireTime: new Date(at),
    renewTime: new Date(at),
    leaseTransitions: 2,
    ...(resourceVersion ? { resourceVersion } : {}),
  });

  it('reads nothing, creates, reads back, updates, and loses races as LeaseConflictError', async () => {
    const lock = createKubernetesLock({ kubeConfig: kubeConfigFor(fake.url), namespace: NS, name: 'lock-basic' });
    assert.equal(lock.describe(), `kubernetes:${NS}/lock-basic`);
    assert.equal(await lock.get(), undefined);
    const created = await lock.create(record('a@h:1', 1_700_000_000_456));
    assert.deepEqual(await lock.get(), created);
    assert.equal(created.renewTime.getTime(), 1_700_000_000_456);
    assert.equal(fake.lease(NS, 'lock-basic')?.spec.renewTime, '2023-11-14T22:13:20.456000Z', 'six-digit MicroTime');
    await assert.rejects(
      lock.create(record('b@h:2', 0)),
      (e: unknown) => e instanceof LeaseConflictError && e.reason === 'already_exists',
    );
    const released = await lock.update({
      ...record(undefined, 1_700_000_001_000),
      resourceVersion: created.resourceVersion!,
    });
    assert.equal(released.holderIdentity, undefined);
    await assert.rejects(
      lock.update(record('b@h:2', 0, created.resourceVersion)),
      (e: unknown) => e instanceof LeaseConflictError && e.reason === 'conflict',
    );
  });

  it('turns a server failure into upstream_unavailable, not a crash or a conflict', async () => {
    const lock = createKubernetesLock({ kubeConfig: kubeConfigFor(fake.url), namespace: NS, name: 'lock-500' });
    fake.setFaults({ failNext: 1 });
    await assert.rejects(
      lock.get(),
      (e: unknown) =>
        e instanceof SwitchyardError &&
        !(e instanceof LeaseConflictError) &&
        e.code === 'upstream_unavailable' &&
        /HTTP 500/.test(e.message),
    );
  });
  it('aborts a request the API server leaves hanging after requestTimeoutMs', async () => {
    const lock = createKubernetesLock({
      kubeConfig: kubeConfigFor(fake.url),
      namespace: NS,
      name: 'lock-slow',
      requestTimeoutMs: 50,
    });
    fake.setFaults({ delayMs: 2_000 });
    const startedMs = performance.now();
    await assert.rejects(lock.get(), (e: unknown) => e instanceof SwitchyardError && e.code === 'upstream_unavailable');
    assert.ok(performance.now() - startedMs < 1_500, 'gave up long before the server answered');
  });
});

/** Counts lock calls in flight, so a manual-clock test can wait for real HTTP between steps without sleeping. */
function tracked(lock: LeaseLock): { lock: LeaseLock; settle: () => Promise<void> } {
  const pending = new Set<Promise<unknown>>();
  const track = <T>(work: Promise<T>): Promise<T> => {
    pending.add(work);
    work.then(
      () => pending.delete(work),
      () => pending.delete(work),
    );
    return work;
  };
  return {
    lock: {
      get: () => track(lock.get()),
      create: (r) => track(lock.create(r)),
      update: (r) => track(lock.update(r)),
      describe: () => lock.describe(),
    },
    async settle() {
      await flushMicrotasks();
      while (pending.size > 0) {
        await Promise.allSettled([...pending]);
        await flushMicrotasks();
      }
    },
  };
}

describe('LeaderElector on the Kubernetes lock', () => {
  it('acquires and renews, survives a 500 outage by stepping down and back, and rides out a 409 storm', async () => {
    const clock = new ManualClock(1_700_000_000_000);
    const lockFor = () =>
      tracked(createKubernetesLock({ kubeConfig: kubeConfigFor(fake.url), namespace: NS, name: 'elected' }));
    const locks = [lockFor(), lockFor()];
    const ids = [
      formatHolder({ id: 'sched-0', address: '10.0.0.1:7000' }),
      formatHolder({ id: 'sched-1', address: '10.0.0.2:7000' }),
    ];
    const signals: AbortSignal[] = [];
    const electors = locks.map(
      (t, i) =>
        new LeaderElector({
          lock: t.lock,
          identity: ids[i]!,
          clock,
          random: () => 0.5,
          onStartedLeading: ({ signal }) => void signals.push(signal),
        }),
    );
    const spec = () =>
      fake.lease(NS, 'elected')?.spec as { holderIdentity: string; renewTime: string; leaseTransitions: number };
    const run = async (ms: number): Promise<void> => {
      for (let t = 0; t < ms; t += 100) {
        await clock.advance(100);
        await Promise.all(locks.map((l) => l.settle()));
        assert.ok(!(electors[0]!.isLeader && electors[1]!.isLeader), 'two leaders');
      }
    };
    try {
      electors[0]!.start();
      await run(100);
      assert.equal(electors[0]!.isLeader, true);
      electors[1]!.start();
      const firstRenew = spec().renewTime;
      await run(10_000);
      assert.equal(electors[0]!.isLeader, true);
      assert.equal(electors[1]!.isLeader, false);
      assert.notEqual(spec().renewTime, firstRenew, 'the leader renewed');
      assert.match(spec().renewTime ?? '', MICRO_TIME);
      assert.equal(spec().holderIdentity, ids[0]);

      fake.setFaults({ failNext: 1_000 });
      await run(10_000);
      assert.equal(electors[0]!.isLeader, false, 'no renewal for renewDeadline: stepped down');
      assert.equal(signals[0]!.aborted, true);
      fake.resetFaults();
      await run(5_000);
      assert.equal(electors.filter((e) => e.isLeader).length, 1, 'a leader again once the API is back');

      fake.setFaults({ conflictNext: 30 });
      await run(20_000);
      fake.resetFaults();
      await run(20_000);
      const leaders = electors.filter((e) => e.isLeader);
      assert.equal(leaders.length, 1, 'a leader after the storm');
      assert.equal(spec().leaseTransitions, leaders[0]!.term);
    } finally {
      const stopping = Promise.all(electors.map((e) => e.stop()));
      await Promise.all(locks.map((l) => l.settle()));
      await stopping;
    }
    assert.equal(spec().holderIdentity, '', 'the last leader released the lease');
  });
});
