import { z } from 'zod';
import { runtimeOpSchema } from './ops.ts';
import { identityValueSchema } from './identity.ts';
import { RUNTIME_LIMITS, metadataSchema, threadRefSchema, weightSchema } from './runtime.ts';

/** SSE event names on a runtime's `GET /watch`. */
export const WATCH_EVENTS = { snapshot: 'snapshot', delta: 'delta' } as const;

/** `snapshot` event data: the runtime's whole state. */
export const watchSnapshotSchema = z.strictObject({
  processes: z.array(identityValueSchema).max(RUNTIME_LIMITS.processesMax),
  threads: z.array(threadRefSchema).max(RUNTIME_LIMITS.threadsMax),
  idleWeight: weightSchema,
  metadata: metadataSchema,
});
export type WatchSnapshot = z.infer<typeof watchSnapshotSchema>;

/** `delta` event data: ordered, coalesced ops since the previous event. */
export const watchDeltaSchema = z.strictObject({ ops: z.array(runtimeOpSchema).max(100_000) });
export type WatchDelta = z.infer<typeof watchDeltaSchema>;
