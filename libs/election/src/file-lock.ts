import { mkdir, readFile, rename, rmdir, stat, writeFile } from 'node:fs/promises';
import { LeaseConflictError } from './errors.ts';
import type { LeaseLock, LeaseRecord } from './lock.ts';

interface StoredRecord {
  holderIdentity?: string;
  leaseDurationSeconds: number;
  acquireTime: string;
  renewTime: string;
  leaseTransitions: number;
  resourceVersion: string;
}

/** A mutex directory older than this is a crashed writer's; it is broken. */
const MUTEX_STALE_MS = 2000;
const MUTEX_WAIT_MS = 1000;

/**
 * A `LeaseLock` in a JSON file, for several processes on ONE machine (the
 * `switchyard up --processes` local cluster). Writes are serialised by an
 * atomic `mkdir` mutex and land by atomic rename, so readers never see a
 * torn record; `resourceVersion` gives the same conflict semantics as the
 * Kubernetes lock. Not a guarantee: anything on network file systems, or
 * across machines — use the `kubernetes` backend there.
 */
export function createFileLock(path: string): LeaseLock {
  const mutex = `${path}.mutex`;

  async function read(): Promise<StoredRecord | undefined> {
    try {
      return JSON.parse(await readFile(path, 'utf8')) as StoredRecord;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
      throw error;
    }
  }

  async function locked<T>(run: () => Promise<T>): Promise<T> {
    const deadline = Date.now() + MUTEX_WAIT_MS;
    for (;;) {
      try {
        await mkdir(mutex);
        break;
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
        const age = await stat(mutex).then(
          (s) => Date.now() - s.mtimeMs,
          () => 0,
        );
        if (age > MUTEX_STALE_MS) await rmdir(mutex).catch(() => undefined);
        if (Date.now() > deadline) throw new Error(`lease file ${path} is busy`, { cause: error });
        await new Promise((resolve) => setTimeout(resolve, 5));
      }
    }
    try {
      return await run();
    } finally {
      await rmdir(mutex).catch(() => undefined);
    }
  }

  async function store(record: LeaseRecord, version: number): Promise<LeaseRecord> {
    const stored: StoredRecord = {
      ...(record.holderIdentity !== undefined ? { holderIdentity: record.holderIdentity } : {}),
      leaseDurationSeconds: record.leaseDurationSeconds,
      acquireTime: record.acquireTime.toISOString(),
      renewTime: record.renewTime.toISOString(),
      leaseTransitions: record.leaseTransitions,
      resourceVersion: String(version),
    };
    const temp = `${path}.${process.pid}.tmp`;
    await writeFile(temp, JSON.stringify(stored));
    await rename(temp, path);
    return toRecord(stored);
  }

  return {
    describe: () => `file:${path}`,
    async get() {
      const stored = await read();
      return stored && toRecord(stored);
    },
    create: (record) =>
      locked(async () => {
        if (await read()) throw new LeaseConflictError('already_exists', `lease file ${path} already exists`);
        return store(record, 1);
      }),
    update: (record) =>
      locked(async () => {
        const current = await read();
        if (!current) throw new LeaseConflictError('conflict', `lease file ${path} does not exist`);
        if (record.resourceVersion !== undefined && record.resourceVersion !== current.resourceVersion) {
          throw new LeaseConflictError(
            'conflict',
            `lease changed: resourceVersion ${record.resourceVersion} is not ${current.resourceVersion}`,
          );
        }
        return store(record, Number(current.resourceVersion) + 1);
      }),
  };
}

function toRecord(stored: StoredRecord): LeaseRecord {
  return {
    holderIdentity: stored.holderIdentity,
    leaseDurationSeconds: stored.leaseDurationSeconds,
    acquireTime: new Date(stored.acquireTime),
    renewTime: new Date(stored.renewTime),
    leaseTransitions: stored.leaseTransitions,
    resourceVersion: stored.resourceVersion,
  };
}
