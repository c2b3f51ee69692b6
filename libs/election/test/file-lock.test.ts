import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createFileLock, isLeaseConflict, type LeaseRecord } from '@switchyard/election';

const record = (holder: string, transitions = 0): LeaseRecord => ({
  holderIdentity: holder,
  leaseDurationSeconds: 15,
  acquireTime: new Date('2026-01-01T00:00:00.000Z'),
  renewTime: new Date('2026-01-01T00:00:01.000Z'),
  leaseTransitions: transitions,
});

describe('file lease lock', () => {
  const dir = mkdtempSync(join(tmpdir(), 'lease-'));
  after(() => rmSync(dir, { recursive: true, force: true }));

  it('reads nothing before the first create', async () => {
    assert.equal(await createFileLock(join(dir, 'empty')).get(), undefined);
  });

  it('creates once and refuses a second create as already_exists', async () => {
    const lock = createFileLock(join(dir, 'create'));
    const created = await lock.create(record('a'));
    assert.equal(created.holderIdentity, 'a');
    await assert.rejects(lock.create(record('b')), (e) => isLeaseConflict(e) && e.reason === 'already_exists');
  });

  it('updates with the current resourceVersion and rejects a stale one', async () => {
    const path = join(dir, 'update');
    const mine = createFileLock(path);
    const theirs = createFileLock(path);
    const first = await mine.create(record('a'));
    const second = await theirs.update({ ...record('b', 1), resourceVersion: first.resourceVersion! });
    assert.equal((await mine.get())?.holderIdentity, 'b');
    await assert.rejects(mine.update({ ...record('a', 2), resourceVersion: first.resourceVersion! }), isLeaseConflict);
    assert.notEqual(second.resourceVersion, first.resourceVersion);
  });

  it('lets exactly one of many concurrent updaters win a version', async () => {
    const path = join(dir, 'race');
    const base = await createFileLock(path).create(record('seed'));
    const outcomes = await Promise.allSettled(
      Array.from({ length: 8 }, (_, i) =>
        createFileLock(path).update({ ...record(`c${i}`, 1), resourceVersion: base.resourceVersion! }),
      ),
    );
    assert.equal(outcomes.filter((o) => o.status === 'fulfilled').length, 1);
  });
});
