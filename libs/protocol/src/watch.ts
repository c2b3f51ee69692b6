import { z } from 'zod';
import { runtimeOpSchema } from './ops.ts';
import { identityValueSchema } from './identity.ts';
import { listOf } from './list.ts';
import { RUNTIME_LIMITS, metadataSchema, threadRefSchema, weightSchema } from './runtime.ts';

/** SSE event names on a runtime's `GET /watch`. */
export const WATCH_EVENTS = { snapshot: 'snapshot', delta: 'delta' } as const;

/** `snapshot` event data: the runtime's whole state. */
export const watchSnapshotSchema = z.strictObject({
  processes: listOf(identityValueSchema, RUNTIME_LIMITS.processesMax),
  threads: listOf(threadRefSchema, RUNTIME_LIMITS.threadsMax),
  idleWeight: weightSchema,
  metadata: metadataSchema,
});
export type WatchSnapshot = z.infer<typeof watchSnapshotSchema>;

/** `delta` event data: ordered, coalesced ops since the previous event. */
export const watchDeltaSchema = z.strictObject({ ops: listOf(runtimeOpSchema, 100_000) });
export type WatchDelta = z.infer<typeof watchDeltaSchema>;
