import { SwitchyardError } from '@switchyard/protocol';
import { LeaseConflictError } from './errors.ts';
import type { LeaseLock, LeaseRecord } from './lock.ts';

/**
 * One lease held in process memory, with the optimistic concurrency of the
 * Kubernetes API: every write gets a new `resourceVersion`, and an update
 * naming an older one is a conflict. Share one store between several locks
 * to let electors in one process compete.
 */
export class MemoryLeaseStore {
  #record: LeaseRecord | undefined;
  #version = 0;

  /** A copy of the stored record (never the stored object itself). */
  read(): LeaseRecord | undefined {
    return this.#record === undefined ? undefined : copy(this.#record);
  }

  create(record: LeaseRecord): LeaseRecord {
    if (this.#record !== undefined) throw new LeaseConflictError('already_exists', 'lease already exists');
    return this.#store(record);
  }

  update(record: LeaseRecord): LeaseRecord {
    if (this.#record === undefined) throw new SwitchyardError('not_found', 'lease does not exist');
    if (record.resourceVersion !== undefined && record.resourceVersion !== this.#record.resourceVersion) {
      throw new LeaseConflictError(
        'conflict',
        `lease changed: resourceVersion ${record.resourceVersion} is not ${this.#record.resourceVersion}`,
      );
    }
    return this.#store(record);
  }

  #store(record: LeaseRecord): LeaseRecord {
    this.#version += 1;
    this.#record = { ...copy(record), resourceVersion: String(this.#version) };
    return copy(this.#record);
  }
}

/** Where a lock call is when the interceptor sees it. */
export interface MemoryLockCall {
  readonly op: 'get' | 'create' | 'update';
  /** `request`: before the store is touched; `response`: after it was (a write has been applied). */
  readonly phase: 'request' | 'response';
}

export interface MemoryLockOptions {
  /**
   * Fault injection for tests. Runs at both phases of every call: throwing
   * fails the call (at `response` the write still happened, as when a reply
   * is lost), a slow promise delays it. Default: none.
   */
  readonly intercept?: (call: MemoryLockCall) => void | Promise<void>;
  /** Shown by `describe()`. Default `memory`. */
  readonly name?: string;
}

/**
 * A `LeaseLock` over a `MemoryLeaseStore` (a fresh one when omitted).
 * Guarantee: the same conflict semantics as the Kubernetes lock. Not a
 * guarantee: anything across processes — this is for one process only.
 */
export function createMemoryLock(
  store: MemoryLeaseStore = new MemoryLeaseStore(),
  options: MemoryLockOptions = {},
): LeaseLock {
  const intercept = options.intercept;
  const name = options.name ?? 'memory';
  async function call<T>(op: MemoryLockCall['op'], run: () => T): Promise<T> {
    if (intercept) await intercept({ op, phase: 'request' });
    const result = run();
    if (intercept) await intercept({ op, phase: 'response' });
    return result;
  }
  return {
    get: () => call('get', () => store.read()),
    create: (record) => call('create', () => store.create(record)),
    update: (record) => call('update', () => store.update(record)),
    describe: () => name,
  };
}

function copy(record: LeaseRecord): LeaseRecord {
  return { ...record, acquireTime: new Date(record.acquireTime), renewTime: new Date(record.renewTime) };
}
