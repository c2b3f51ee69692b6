import { z } from 'zod';
import { identityValueSchema } from './identity.ts';
import { metadataSchema, runtimeSchema, weightSchema } from './runtime.ts';

/**
 * Changes to one runtime's state, as a runtime publishes them on `/watch`.
 * Ordered; a consumer applies them in sequence.
 */
export const runtimeOpSchema = z.discriminatedUnion('op', [
  z.strictObject({ op: z.literal('process.add'), process: identityValueSchema }),
  z.strictObject({ op: z.literal('process.remove'), process: identityValueSchema }),
  z.strictObject({ op: z.literal('thread.add'), process: identityValueSchema, thread: identityValueSchema }),
  z.strictObject({ op: z.literal('thread.remove'), process: identityValueSchema, thread: identityValueSchema }),
  z.strictObject({ op: z.literal('weight'), idleWeight: weightSchema }),
  z.strictObject({ op: z.literal('metadata'), metadata: metadataSchema }),
]);
export type RuntimeOp = z.infer<typeof runtimeOpSchema>;

/**
 * Changes to the cluster snapshot: a runtime op scoped to a runtime id, or a
 * runtime added, replaced or removed whole. Epoch commits carry these.
 */
export const clusterOpSchema = z.union([
  z.strictObject({ op: z.literal('runtime.upsert'), runtime: runtimeSchema }),
  z.strictObject({ op: z.literal('runtime.remove'), runtimeId: identityValueSchema }),
  z.strictObject({ op: z.literal('runtime.available'), runtimeId: identityValueSchema, available: z.boolean() }),
  z.strictObject({ op: z.literal('process.add'), runtimeId: identityValueSchema, process: identityValueSchema }),
  z.strictObject({ op: z.literal('process.remove'), runtimeId: identityValueSchema, process: identityValueSchema }),
  z.strictObject({
    op: z.literal('thread.add'),
    runtimeId: identityValueSchema,
    process: identityValueSchema,
    thread: identityValueSchema,
  }),
  z.strictObject({
    op: z.literal('thread.remove'),
    runtimeId: identityValueSchema,
    process: identityValueSchema,
    thread: identityValueSchema,
  }),
  z.strictObject({ op: z.literal('weight'), runtimeId: identityValueSchema, idleWeight: weightSchema }),
  z.strictObject({ op: z.literal('metadata'), runtimeId: identityValueSchema, metadata: metadataSchema }),
]);
export type ClusterOp = z.infer<typeof clusterOpSchema>;

/** Scopes a runtime's own op to its id, for the cluster snapshot. */
export function toClusterOp(runtimeId: string, op: RuntimeOp): ClusterOp {
  return { ...op, runtimeId } as ClusterOp;
}
