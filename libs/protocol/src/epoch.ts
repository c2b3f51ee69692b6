import { z } from 'zod';
import { identityValueSchema } from './identity.ts';
import { listOf } from './list.ts';
import { clusterOpSchema } from './ops.ts';
import { runtimeStateSchema } from './runtime.ts';
import { snapshotSchema } from './snapshot.ts';

const termSchema = z.number().int().min(0);
const epochSchema = z.number().int().min(0);

/** A follower's part: the runtimes whose tunnels it holds, full or as changes since a base. */
export const partSchema = z.discriminatedUnion('kind', [
  z.strictObject({ kind: z.literal('full'), runtimes: listOf(runtimeStateSchema, 100_000) }),
  z.strictObject({
    kind: z.literal('delta'),
    /** The part version the changes apply to (the follower's own counter). */
    base: z.number().int().min(0),
    ops: listOf(clusterOpSchema, 1_000_000),
  }),
]);
export type Part = z.infer<typeof partSchema>;

/** Epoch sync messages (`GET /api/sync/:replica`, JSON text frames). */
export const syncMessageSchema = z.discriminatedUnion('type', [
  z.strictObject({ type: z.literal('announce'), term: termSchema, epoch: epochSchema }),
  z.strictObject({
    type: z.literal('collect'),
    term: termSchema,
    epoch: epochSchema,
    replica: identityValueSchema,
    /** Version of the part after these changes. */
    version: z.number().int().min(0),
    part: partSchema,
  }),
  z.strictObject({
    type: z.literal('commit'),
    term: termSchema,
    epoch: epochSchema,
    body: z.discriminatedUnion('kind', [
      z.strictObject({ kind: z.literal('snapshot'), snapshot: snapshotSchema }),
      z.strictObject({
        kind: z.literal('delta'),
        baseEpoch: epochSchema,
        ops: listOf(clusterOpSchema, 1_000_000),
      }),
    ]),
  }),
  z.strictObject({ type: z.literal('error'), term: termSchema, epoch: epochSchema, reason: z.string().max(1024) }),
  /** Follower asks for a full snapshot (after a gap) or a full part request from the leader. */
  z.strictObject({ type: z.literal('resync'), term: termSchema, what: z.enum(['snapshot', 'part']) }),
]);
export type SyncMessage = z.infer<typeof syncMessageSchema>;
export type CommitBody = Extract<SyncMessage, { type: 'commit' }>['body'];
