import { z } from 'zod';
import { identityValueSchema } from './identity.ts';
import { listOf } from './list.ts';
import { clusterOpSchema } from './ops.ts';
import { runtimeStateSchema } from './runtime.ts';
import { SNAPSHOT_RUNTIMES_MAX, snapshotSchema } from './snapshot.ts';
import { termSchema } from './term.ts';

/** An epoch number. */
export const epochSchema = z.number().int().min(0);

/**
 * The highest epoch a peer may name as its latest (`error.latestEpoch`). A
 * leader's next term numbers its epochs on from it, so a claim near 2^53
 * (where a double stops counting: 2^53 + 1 is 2^53) would leave epochs that
 * no longer rise and commits no follower accepts (not safe integers). From
 * 2^48, 2^53 − 2^48 commits remain: some 280,000 years at 1,000 a second.
 * No honest replica comes near it (a cluster committing 1,000 epochs a
 * second reaches it in some 8,900 years): a peer claiming more is broken or
 * hostile, and its frame is refused (1008) like any invalid one.
 */
export const EPOCH_MAX = 2 ** 48;

/**
 * Most ops a delta carries (a commit's, or a collect's part). A sender holding more sends the whole state
 * instead (a snapshot commit, a full part), which goes in parts: a receiver refuses a delta above it as invalid.
 */
export const SYNC_OPS_MAX = 1_000_000;

/** A follower's part: the runtimes whose tunnels it holds, full or as changes since a base. */
export const partSchema = z.discriminatedUnion('kind', [
  z.strictObject({ kind: z.literal('full'), runtimes: listOf(runtimeStateSchema, SNAPSHOT_RUNTIMES_MAX) }),
  z.strictObject({
    kind: z.literal('delta'),
    /** The part version the changes apply to (the follower's own counter). */
    base: z.number().int().min(0),
    ops: listOf(clusterOpSchema, SYNC_OPS_MAX),
  }),
]);
export type Part = z.infer<typeof partSchema>;

/**
 * Header of a leader's answer to the sync upgrade, and of a follower's upgrade request: the optional
 * message fields and frames the sender reads, comma-separated. Messages are validated strictly, so neither
 * sends the other a field or frame it does not list (a follower of an earlier release sends no header: it
 * reads none).
 */
export const SYNC_FEATURES_HEADER = 'x-switchyard-sync-features';
/** The optional fields named in `SYNC_FEATURES_HEADER`. */
export const SYNC_FEATURES = {
  /** An `error`'s `latestEpoch` (leaders list it). */
  latestEpoch: 'error.latestEpoch',
  /** A runtime's `tokenFingerprint`, in parts and commits (leaders and followers list it). */
  tokenFingerprint: 'runtime.tokenFingerprint',
  /** A runtime's `instance`, in parts and commits (leaders and followers list it). */
  instance: 'runtime.instance',
  /**
   * A commit's snapshot or a full collect part may come as a run of `part` frames closed by a `commit-end` or
   * `collect-end` (see `syncPartSchema`; leaders and followers list it).
   */
  parts: 'parts',
} as const;

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
        ops: listOf(clusterOpSchema, SYNC_OPS_MAX),
      }),
    ]),
  }),
  z.strictObject({
    type: z.literal('error'),
    term: termSchema,
    epoch: epochSchema,
    reason: z.string().max(1024),
    /**
     * The sender's latest epoch, of any term (optional: peers before it send none). A leader's next term
     * numbers its epochs above it, so no view's epoch number goes back. Only sent to a leader that
     * advertises `SYNC_FEATURES.latestEpoch`: older ones refuse a message with a field they do not know.
     */
    latestEpoch: epochSchema.max(EPOCH_MAX).optional(),
  }),
  /** Follower asks for a full snapshot (after a gap) or a full part request from the leader. */
  z.strictObject({ type: z.literal('resync'), term: termSchema, what: z.enum(['snapshot', 'part']) }),
]);
export type SyncMessage = z.infer<typeof syncMessageSchema>;
export type CommitBody = Extract<SyncMessage, { type: 'commit' }>['body'];
