import { z } from 'zod';
import { listOf } from './list.ts';
import type { Runtime } from './runtime.ts';
import { SNAPSHOT_RUNTIMES_MAX } from './snapshot.ts';

// The answers of the scheduler's operator API, as `switchyard status` and
// `explain` read them. The scheduler builds them typed by these schemas and
// the command parses them with the same, so the two cannot drift apart. Ids,
// keys and values are any strings here, unlike on the wire between
// components: a reader shows what any URL answers (escaped), and a field
// that only a later release sends is dropped, not refused.

/** `GET /api/epoch`: the replica's view of the cluster, for the epoch line of `switchyard status`. */
export const epochInfoSchema = z.object({
  replica: z.string(),
  /** Null before the replica applied its first epoch. */
  epoch: z.number().nullable(),
  /**
   * Since the replica last knew its epoch to be the newest; null with no
   * epoch. Absent from schedulers of releases before it was reported.
   */
  epochAgeMs: z.number().nullable().optional(),
  term: z.number(),
  isLeader: z.boolean(),
  leader: z.object({ id: z.string(), url: z.string() }).nullable(),
  counts: z.object({ runtimes: z.number(), processes: z.number(), threads: z.number() }),
  /** Runtimes whose tunnels this replica holds. */
  localRuntimes: z.number(),
});
export type EpochInfo = z.infer<typeof epochInfoSchema>;

/** A runtime of `GET /api/runtimes`: the runtime's record with the sizes of what it holds. */
export const listedRuntimeSchema = z.object({
  id: z.string(),
  classes: z.array(z.string()),
  metadata: z.record(z.string(), z.string()),
  version: z.string(),
  idleWeight: z.record(z.string(), z.number()),
  available: z.boolean(),
  owner: z.string(),
  ownerUrl: z.string().optional(),
  generation: z.number(),
  address: z.string().optional(),
  processes: z.number(),
  threads: z.number(),
});
export type ListedRuntime = z.infer<typeof listedRuntimeSchema>;

// The scheduler spreads a Runtime into each summary, where the compiler sees no excess field: a field
// added to Runtime would reach the answer unlisted here. This fails to compile until the two agree.
// `tokenFingerprint` and `instance` are for peers only: the scheduler leaves them out of its answers.
type SameKeys<A, B> = [Exclude<A, B> | Exclude<B, A>] extends [never] ? true : never;
const listedKeysMatchRuntime: SameKeys<
  keyof ListedRuntime,
  Exclude<keyof Runtime, 'tokenFingerprint' | 'instance'> | 'processes' | 'threads'
> = true;
void listedKeysMatchRuntime;

/**
 * `GET /api/runtimes`: the runtime table with the whole epoch line, read
 * together so both describe one epoch. Schedulers of earlier releases answer
 * only `runtimesTableSchema` here, and the epoch line apart, in `/api/epoch`.
 */
export const runtimesAnswerSchema = epochInfoSchema.extend({
  runtimes: listOf(listedRuntimeSchema, SNAPSHOT_RUNTIMES_MAX),
});
export type RuntimesAnswer = z.infer<typeof runtimesAnswerSchema>;

/** The part of `GET /api/runtimes` that schedulers of every release answer. */
export const runtimesTableSchema = runtimesAnswerSchema.pick({ epoch: true, runtimes: true });
export type RuntimesTable = z.infer<typeof runtimesTableSchema>;

/** The body of a scheduler API error (`code` from `ERROR_CODES`; absent from some refusals). */
export const apiErrorSchema = z.object({ error: z.string(), code: z.string().optional() });
export type ApiError = z.infer<typeof apiErrorSchema>;
