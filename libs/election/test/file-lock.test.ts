import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { promisify } from 'node:util';
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

  it('refuses a writer far behind even after its next version file was cleaned up', async () => {
    const path = join(dir, 'far-behind');
    const lock = createFileLock(path);
    const first = await lock.create(record('a'));
    let current = first;
    for (let i = 0; i < 100; i++)
      current = await lock.update({ ...record('a'), resourceVersion: current.resourceVersion! });
    await assert.rejects(lock.update({ ...record('stale'), resourceVersion: first.resourceVersion! }), isLeaseConflict);
    assert.equal((await lock.get())?.resourceVersion, current.resourceVersion);
  });

  it('keeps a bounded number of files and no temporary ones', async () => {
    const sub = mkdtempSync(join(dir, 'bounded-'));
    const lock = createFileLock(join(sub, 'lease'));
    let current = await lock.create(record('a'));
    for (let i = 0; i < 150; i++)
      current = await lock.update({ ...record('a'), resourceVersion: current.resourceVersion! });
    const files = readdirSync(sub);
    assert.ok(files.length <= 65, `${files.length} files`);
    assert.deepEqual(
      files.filter((f) => f.endsWith('.tmp')),
      [],
    );
  });

  it('lets exactly one of several PROCESSES win the same version', async () => {
    const path = join(dir, 'processes');
    const base = await createFileLock(path).create(record('seed'));
    const script = `
      import { createFileLock } from '@switchyard/election';
      const [path, id, version] = process.argv.slice(1);
      const at = new Date();
      const rec = { holderIdentity: id, leaseDurationSeconds: 15, acquireTime: at, renewTime: at, leaseTransitions: 1, resourceVersion: version };
      createFileLock(path).update(rec).then(() => console.log('won'), (e) => console.log(e.name));
    `;
    const run = promisify(execFile);
    const root = join(import.meta.dirname, '../../..');
    const outputs = await Promise.all(
      ['p0', 'p1', 'p2', 'p3'].map((id) =>
        run(process.execPath, ['--input-type=module', '-e', script, path, id, base.resourceVersion!], { cwd: root }),
      ),
    );
    const results = outputs.map((o) => o.stdout.trim()).sort();
    assert.deepEqual(results, ['LeaseConflictError', 'LeaseConflictError', 'LeaseConflictError', 'won']);
    const holder = (await createFileLock(path).get())?.holderIdentity;
    assert.ok(holder && ['p0', 'p1', 'p2', 'p3'].includes(holder));
  });
});
