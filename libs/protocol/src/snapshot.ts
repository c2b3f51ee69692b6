import { z } from 'zod';
import { listOf } from './list.ts';
import { runtimeStateSchema } from './runtime.ts';
import { termSchema } from './term.ts';

/** Runtimes one epoch may hold. */
export const SNAPSHOT_RUNTIMES_MAX = 100_000;

/**
 * The cluster state of one epoch, in wire form. Runtimes appear in any order;
 * consumers must not depend on it (the scheduling index sorts by id).
 */
export const snapshotSchema = z.strictObject({
  epoch: z.number().int().min(0),
  term: termSchema,
  runtimes: listOf(runtimeStateSchema, SNAPSHOT_RUNTIMES_MAX),
});
export type Snapshot = z.infer<typeof snapshotSchema>;
