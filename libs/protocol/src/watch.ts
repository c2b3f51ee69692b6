import { z } from 'zod';
import { runtimeOpSchema } from './ops.ts';
import { identityValueSchema } from './identity.ts';
import { listOf } from './list.ts';
import { RUNTIME_LIMITS, metadataSchema, threadRefSchema, weightSchema } from './runtime.ts';

/** SSE event names on a runtime's `GET /watch`. */
export const WATCH_EVENTS = { snapshot: 'snapshot', delta: 'delta' } as const;

/** Limits of one `/watch` event. */
export const WATCH_LIMITS = {
  /** Ops in one `delta` event. */
  deltaOpsMax: 100_000,
  /**
   * Characters of one event a scheduler takes (33,554,432: 32 Mi). The largest delta
   * the schema admits is about 30.4 M: `deltaOpsMax` thread ops naming two
   * 128-character ids (304 characters apiece), a weight op and a metadata op.
   * A snapshot must fit too: at identity values of 36 characters, e.g. 100,000
   * processes and 290,000 threads. The state limits (`RUNTIME_LIMITS`) would
   * allow a snapshot of about 3 G, which no JavaScript string holds: one event
   * cannot carry all of them, so what a scheduler buffers for an unfinished
   * event is bounded here, not by them.
   */
  eventCharsMax: 32 * 1024 * 1024,
} as const;

/** `snapshot` event data: the runtime's whole state. */
export const watchSnapshotSchema = z.strictObject({
  processes: listOf(identityValueSchema, RUNTIME_LIMITS.processesMax),
  threads: listOf(threadRefSchema, RUNTIME_LIMITS.threadsMax),
  idleWeight: weightSchema,
  metadata: metadataSchema,
});
export type WatchSnapshot = z.infer<typeof watchSnapshotSchema>;

/** `delta` event data: ordered, coalesced ops since the previous event. */
export const watchDeltaSchema = z.strictObject({ ops: listOf(runtimeOpSchema, WATCH_LIMITS.deltaOpsMax) });
export type WatchDelta = z.infer<typeof watchDeltaSchema>;
