/**
 * One observation of the lease, in the shape client-go's
 * `LeaderElectionRecord` has. `holderIdentity` is `undefined` when the lease
 * is free (released, or never held).
 */
export interface LeaseRecord {
  readonly holderIdentity: string | undefined;
  /** How long others must wait, from when THEY observe this record, before taking the lease. */
  readonly leaseDurationSeconds: number;
  readonly acquireTime: Date;
  readonly renewTime: Date;
  /** Number of holder changes; the elector uses it as the term. */
  readonly leaseTransitions: number;
  /**
   * Opaque optimistic-concurrency token. `update` succeeds only while the
   * stored record still carries it; absent means "overwrite unconditionally".
   */
  readonly resourceVersion?: string;
}

/**
 * The storage seam of the elector: get / create / update one lease record.
 *
 * Guarantees expected of an implementation: `create` fails with
 * `LeaseConflictError` when the record exists; `update` fails with
 * `LeaseConflictError` when `resourceVersion` no longer matches; both return
 * the stored record with its new `resourceVersion`. Any other failure throws
 * (the elector counts it as a failed attempt, never as a crash).
 */
export interface LeaseLock {
  /** The current record, or `undefined` when none exists. */
  get(): Promise<LeaseRecord | undefined>;
  create(record: LeaseRecord): Promise<LeaseRecord>;
  update(record: LeaseRecord): Promise<LeaseRecord>;
  /** Human-readable location of the lock, for logs (e.g. `kubernetes:ns/name`). */
  describe(): string;
}
