import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { LeaseConflictError, MemoryLeaseStore, createMemoryLock } from '@switchyard/election';
import type { LeaseRecord, MemoryLockCall } from '@switchyard/election';

const record = (holder: string | undefined, resourceVersion?: string): LeaseRecord => ({
  holderIdentity: holder,
  leaseDurationSeconds: 15,
  acquireTime: new Date(1_000),
  renewTime: new Date(2_000),
  leaseTransitions: 0,
  ...(resourceVersion === undefined ? {} : { resourceVersion }),
});

describe('memory lock', () => {
  it('reads nothing before the first create, then what was stored with a new version per write', async () => {
    const lock = createMemoryLock();
    assert.equal(await lock.get(), undefined);
    const created = await lock.create(record('a'));
    assert.equal(created.resourceVersion, '1');
    const updated = await lock.update({ ...record('b'), resourceVersion: created.resourceVersion! });
    assert.equal(updated.resourceVersion, '2');
    assert.deepEqual(await lock.get(), updated);
  });

  it('shares one store between locks, with conflicts on a stale version and on a second create', async () => {
    const store = new MemoryLeaseStore();
    const a = createMemoryLock(store);
    const b = createMemoryLock(store);
    const first = await a.create(record('a'));
    await assert.rejects(
      b.create(record('b')),
      (e: unknown) => e instanceof LeaseConflictError && e.reason === 'already_exists',
    );
    await b.update({ ...record('b'), resourceVersion: first.resourceVersion! });
    await assert.rejects(
      a.update({ ...record('a'), resourceVersion: first.resourceVersion! }),
      (e: unknown) => e instanceof LeaseConflictError && e.reason === 'conflict',
    );
    assert.equal((await a.get())?.holderIdentity, 'b');
  });

  it('never hands out its stored object, so callers cannot change it in place', async () => {
    const lock = createMemoryLock();
    const created = await lock.create(record('a'));
    created.renewTime.setTime(0);
    assert.equal((await lock.get())?.renewTime.getTime(), 2_000);
  });

  it('lets a fault at response time lose the reply after the write was applied', async () => {
    const seen: MemoryLockCall[] = [];
    const store = new MemoryLeaseStore();
    const lock = createMemoryLock(store, {
      intercept: (call) => {
        seen.push(call);
        if (call.op === 'create' && call.phase === 'response') throw new Error('reply lost');
      },
    });
    await assert.rejects(lock.create(record('a')), /reply lost/);
    assert.equal(store.read()?.holderIdentity, 'a');
    assert.deepEqual(seen, [
      { op: 'create', phase: 'request' },
      { op: 'create', phase: 'response' },
    ]);
  });
});
