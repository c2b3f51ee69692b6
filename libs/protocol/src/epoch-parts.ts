import { z } from 'zod';
import { epochSchema, syncMessageSchema } from './epoch.ts';
import { identityValueSchema } from './identity.ts';
import { listOf } from './list.ts';
import { RUNTIME_LIMITS, runtimeStateSchema } from './runtime.ts';
import { SNAPSHOT_RUNTIMES_MAX } from './snapshot.ts';
import { termSchema } from './term.ts';

/**
 * Limits of a run of parts (`SYNC_FEATURES.parts`). What a receiver gathers for an unfinished run is bounded
 * by the state limits a whole message has, not by one frame: at most `SNAPSHOT_RUNTIMES_MAX` runtimes, each
 * with at most `RUNTIME_LIMITS.processesMax` processes and `RUNTIME_LIMITS.threadsMax` threads.
 */
export const SYNC_PART_LIMITS = {
  runtimesMax: SNAPSHOT_RUNTIMES_MAX,
  /** Parts of one run: each brings a runtime, or a process or thread of one, that the run had not. */
  partsMax: SNAPSHOT_RUNTIMES_MAX * (1 + RUNTIME_LIMITS.processesMax + RUNTIME_LIMITS.threadsMax),
} as const;

const partsSchema = z.number().int().min(1).max(SYNC_PART_LIMITS.partsMax);

/**
 * One part of a run: the next runtimes of a commit's snapshot or of a follower's full part. An entry whose
 * runtime id is that of the entry before it (in this part, or the last of the part before) continues that
 * runtime: the same `runtime`, at least one more process or thread, its lists appended. So a runtime bigger
 * than a frame spans parts. A runtime id listed again after another is a fault. Every part of a run carries
 * the term and epoch of the message the run makes, and nothing else comes between the parts of a run.
 */
export const syncPartSchema = z.strictObject({
  type: z.literal('part'),
  term: termSchema,
  epoch: epochSchema,
  /** 0, 1, … within the run. */
  part: z
    .number()
    .int()
    .min(0)
    .max(SYNC_PART_LIMITS.partsMax - 1),
  runtimes: listOf(runtimeStateSchema, SYNC_PART_LIMITS.runtimesMax).refine((list) => list.length > 0, {
    message: 'a part lists at least one runtime',
  }),
});
export type SyncPart = z.infer<typeof syncPartSchema>;

/** Closes a run into `commit {term, epoch, body: {kind: 'snapshot', snapshot: {epoch, term, runtimes}}}`. */
export const syncCommitEndSchema = z.strictObject({
  type: z.literal('commit-end'),
  term: termSchema,
  epoch: epochSchema,
  /** How many parts came before it. */
  parts: partsSchema,
});

/** Closes a run into `collect {term, epoch, replica, version, part: {kind: 'full', runtimes}}`. */
export const syncCollectEndSchema = z.strictObject({
  type: z.literal('collect-end'),
  term: termSchema,
  epoch: epochSchema,
  replica: identityValueSchema,
  version: z.number().int().min(0),
  parts: partsSchema,
});
export type SyncRunEnd = z.infer<typeof syncCommitEndSchema> | z.infer<typeof syncCollectEndSchema>;

/** One text frame of epoch sync: a whole message, or a part or end of a run (only to peers listing the feature). */
export const syncFrameSchema = z.discriminatedUnion('type', [
  ...syncMessageSchema.options,
  syncPartSchema,
  syncCommitEndSchema,
  syncCollectEndSchema,
]);
export type SyncFrame = z.infer<typeof syncFrameSchema>;
