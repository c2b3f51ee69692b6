import { SwitchyardError } from '@switchyard/protocol';

/** Why a write lost: the record changed under us, or a create found one already there. */
export type LeaseConflictReason = 'conflict' | 'already_exists';

/**
 * A lease write lost an optimistic-concurrency race (HTTP 409 from the
 * Kubernetes API). The elector treats it as "someone else got there first":
 * a failed attempt, never a crash.
 */
export class LeaseConflictError extends SwitchyardError {
  readonly reason: LeaseConflictReason;
  constructor(reason: LeaseConflictReason, message: string, options?: { cause?: unknown }) {
    super('conflict', message, options);
    this.name = 'LeaseConflictError';
    this.reason = reason;
  }
}

/** True for a lost race, whichever lock raised it. */
export function isLeaseConflict(error: unknown): error is LeaseConflictError {
  return error instanceof LeaseConflictError;
}
