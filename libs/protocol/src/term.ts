import { z } from 'zod';

/**
 * The highest leadership term. The term is the Lease's `leaseTransitions`,
 * which Kubernetes stores as an int32: a lease written with a higher one is
 * refused, and a replica that had to lead above it could never lead again.
 * A peer claiming a higher term claims one no leader can have held.
 */
export const TERM_MAX = 2 ** 31 - 1;

export const termSchema = z.number().int().min(0).max(TERM_MAX);
