import { z } from 'zod';
import { runtimeOpSchema } from './ops.ts';
import { identityValueSchema } from './identity.ts';
import { listOf } from './list.ts';
import { RUNTIME_LIMITS, metadataSchema, threadRefSchema, weightSchema } from './runtime.ts';

/** SSE event names on a runtime's `GET /watch`. */
export const WATCH_EVENTS = {
  snapshot: 'snapshot',
  delta: 'delta',
  /** One slice of a snapshot sent in parts (see `WATCH_FEATURES.snapshotParts`). */
  snapshotPart: 'snapshot-part',
  /** Closes a snapshot sent in parts: the state takes effect with it. */
  snapshotEnd: 'snapshot-end',
} as const;

/**
 * Request header of `GET /watch`: the stream features the consumer reads,
 * comma-separated. A runtime sends a feature's events only to a consumer
 * that lists it; one of an earlier release ignores the header and sends
 * what it always sent, which every consumer reads.
 */
export const WATCH_FEATURES_HEADER = 'x-switchyard-watch-features';
/** The features named in `WATCH_FEATURES_HEADER`. */
export const WATCH_FEATURES = {
  /** A snapshot may come as `snapshot-part` events closed by a `snapshot-end`. */
  snapshotParts: 'snapshot-parts',
} as const;

/** Limits of one `/watch` event. */
export const WATCH_LIMITS = {
  /** Ops in one `delta` event. */
  deltaOpsMax: 100_000,
  /**
   * Characters of one event a scheduler takes (33,554,432: 32 Mi). The largest delta
   * the schema admits is about 30.4 M: `deltaOpsMax` thread ops naming two
   * 128-character ids (304 characters apiece), a weight op and a metadata op.
   * A whole snapshot must fit too: at identity values of 36 characters, e.g.
   * 100,000 processes and 290,000 threads. The state limits (`RUNTIME_LIMITS`)
   * allow a snapshot of about 3 G, which no JavaScript string holds: a consumer
   * that lists `WATCH_FEATURES.snapshotParts` takes a bigger one in parts, each
   * an event within this limit. What it gathers for an unfinished run of parts
   * is the state they make, bounded by the state limits (distinct processes and
   * threads counted), not here.
   */
  eventCharsMax: 32 * 1024 * 1024,
  /**
   * Processes and threads (together, at least one) one `snapshot-part` lists:
   * at 283 characters for the longest thread entry, a part takes at most about
   * 2.8 M characters, under a tenth of `eventCharsMax`.
   */
  snapshotPartEntriesMax: 10_000,
  /** Parts of one snapshot: each lists at least one of the entries the state limits allow. */
  snapshotPartsMax: RUNTIME_LIMITS.processesMax + RUNTIME_LIMITS.threadsMax,
} as const;

/** `snapshot` event data: the runtime's whole state. */
export const watchSnapshotSchema = z.strictObject({
  processes: listOf(identityValueSchema, RUNTIME_LIMITS.processesMax),
  threads: listOf(threadRefSchema, RUNTIME_LIMITS.threadsMax),
  idleWeight: weightSchema,
  metadata: metadataSchema,
});
export type WatchSnapshot = z.infer<typeof watchSnapshotSchema>;

/**
 * `snapshot-part` event data: part number `part` (0, 1, …) of a snapshot, the
 * next processes and threads of its lists. Every part of one snapshot carries
 * the snapshot's event id.
 */
export const watchSnapshotPartSchema = z
  .strictObject({
    part: z
      .number()
      .int()
      .min(0)
      .max(WATCH_LIMITS.snapshotPartsMax - 1),
    processes: listOf(identityValueSchema, WATCH_LIMITS.snapshotPartEntriesMax),
    threads: listOf(threadRefSchema, WATCH_LIMITS.snapshotPartEntriesMax),
  })
  .refine(
    ({ processes, threads }) => {
      const entries = processes.length + threads.length;
      return entries >= 1 && entries <= WATCH_LIMITS.snapshotPartEntriesMax;
    },
    { message: `a part lists 1 to ${WATCH_LIMITS.snapshotPartEntriesMax} processes and threads` },
  );
export type WatchSnapshotPart = z.infer<typeof watchSnapshotPartSchema>;

/** `snapshot-end` event data: how many parts came, and the rest of the state. */
export const watchSnapshotEndSchema = z.strictObject({
  parts: z.number().int().min(1).max(WATCH_LIMITS.snapshotPartsMax),
  idleWeight: weightSchema,
  metadata: metadataSchema,
});
export type WatchSnapshotEnd = z.infer<typeof watchSnapshotEndSchema>;

/** `delta` event data: ordered, coalesced ops since the previous event. */
export const watchDeltaSchema = z.strictObject({ ops: listOf(runtimeOpSchema, WATCH_LIMITS.deltaOpsMax) });
export type WatchDelta = z.infer<typeof watchDeltaSchema>;
