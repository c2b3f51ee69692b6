import { randomUUID } from 'node:crypto';
import { link, readFile, rename, unlink, writeFile } from 'node:fs/promises';
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

/**
 * Version files kept behind the newest; older ones are deleted so the
 * directory stays bounded. A writer that read version n can only be fooled
 * if all of n+1 … n+64 were written and n+1 deleted between its read and
 * its link — far beyond what electors renewing every few seconds produce.
 */
const VERSIONS_KEPT = 64;
/** Longest forward walk from the pointer to the newest version file. */
const PROBE_MAX = 64;
/** Unconditional updates (no resourceVersion) retry this often when racing. */
const UNCONDITIONAL_TRIES = 8;

/**
 * A `LeaseLock` in files, for several processes on ONE machine (the
 * `switchyard up --processes` local cluster).
 *
 * Compare-and-swap without a mutex: version `n` of the record is the file
 * `<path>.v<n>`, written in full to a temporary file and then `link`ed into
 * place. `link` fails when the target exists, so exactly one writer wins
 * each version, with no stale-lock breaking and no torn reads; an update
 * from `resourceVersion` n creates `v<n+1>` or fails with
 * `LeaseConflictError`, as on the Kubernetes API. `<path>` itself is a
 * pointer to a recent version (readers walk forward from it).
 *
 * Not guaranteed: anything on network file systems or across machines —
 * use the `kubernetes` backend there.
 */
export function createFileLock(path: string): LeaseLock {
  const versionFile = (n: number): string => `${path}.v${n}`;

  async function readJson(file: string): Promise<StoredRecord | undefined> {
    try {
      return JSON.parse(await readFile(file, 'utf8')) as StoredRecord;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
      throw error;
    }
  }

  /** The newest version: from the pointer (or nothing), forward while `v<n+1>` exists. */
  async function latest(): Promise<StoredRecord | undefined> {
    let current = await readJson(path);
    if (!current) current = await readJson(versionFile(1));
    for (let i = 0; current && i < PROBE_MAX; i++) {
      const next = await readJson(versionFile(Number(current.resourceVersion) + 1));
      if (!next) return current;
      current = next;
    }
    return current;
  }

  /** Writes `record` as version `n` if no one has; `undefined` when someone did. */
  async function claim(record: LeaseRecord, n: number): Promise<StoredRecord | undefined> {
    const stored = toStored(record, n);
    const temp = `${path}.${process.pid}.${randomUUID()}.tmp`;
    await writeFile(temp, JSON.stringify(stored));
    try {
      await link(temp, versionFile(n));
    } catch (error) {
      await unlink(temp).catch(() => undefined);
      if ((error as NodeJS.ErrnoException).code === 'EEXIST') return undefined;
      throw error;
    }
    // The pointer may briefly lag or even step back under races; readers walk forward, so it only saves work.
    await rename(temp, path).catch(() => unlink(temp).catch(() => undefined));
    if (n > VERSIONS_KEPT) await unlink(versionFile(n - VERSIONS_KEPT)).catch(() => undefined);
    return stored;
  }

  return {
    describe: () => `file:${path}`,
    async get() {
      const stored = await latest();
      return stored && toRecord(stored);
    },
    async create(record) {
      if (await latest()) throw new LeaseConflictError('already_exists', `lease file ${path} already exists`);
      const stored = await claim(record, 1);
      if (!stored) throw new LeaseConflictError('already_exists', `lease file ${path} already exists`);
      return toRecord(stored);
    },
    async update(record) {
      for (let i = 0; i < UNCONDITIONAL_TRIES; i++) {
        const current = await latest();
        if (!current) throw new LeaseConflictError('conflict', `lease file ${path} does not exist`);
        const base = record.resourceVersion ?? current.resourceVersion;
        // Checked first so a writer far behind never reaches a deleted version number.
        if (base !== current.resourceVersion) break;
        const stored = await claim(record, Number(base) + 1);
        if (stored) return toRecord(stored);
        if (record.resourceVersion !== undefined) break;
      }
      throw new LeaseConflictError('conflict', `lease ${path} changed since resourceVersion ${record.resourceVersion}`);
    },
  };
}

function toStored(record: LeaseRecord, version: number): StoredRecord {
  return {
    ...(record.holderIdentity !== undefined ? { holderIdentity: record.holderIdentity } : {}),
    leaseDurationSeconds: record.leaseDurationSeconds,
    acquireTime: record.acquireTime.toISOString(),
    renewTime: record.renewTime.toISOString(),
    leaseTransitions: record.leaseTransitions,
    resourceVersion: String(version),
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
