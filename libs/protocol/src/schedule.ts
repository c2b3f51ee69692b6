import { z } from 'zod';
import { identityValueSchema } from './identity.ts';
import { listOf } from './list.ts';
import { SNAPSHOT_RUNTIMES_MAX } from './snapshot.ts';

/** Rule operators of affinity and process selectors. */
export const RULE_OPS = ['equal', 'not_equal', 'exists', 'latest_version'] as const;
export type RuleOp = (typeof RULE_OPS)[number];

/**
 * One condition on a runtime. `key` names a metadata entry; the reserved key
 * `version` names the runtime's version. `latest_version` keeps the runtimes
 * whose value is the highest valid semver among the candidates.
 */
export const ruleSchema = z
  .strictObject({
    key: z.string().min(1).max(63),
    op: z.enum(RULE_OPS),
    value: z.string().max(256).optional(),
  })
  .refine((r) => r.op === 'exists' || r.op === 'latest_version' || r.value !== undefined, {
    message: 'value is required for equal and not_equal',
    path: ['value'],
  });
export type Rule = z.infer<typeof ruleSchema>;

/** Reserved rule key that refers to `Runtime.version`. */
export const VERSION_RULE_KEY = 'version';

/**
 * How the final selector orders and picks. `sortBy` is `weight` (the
 * smallest idle-weight dimension) or a dimension name, `-` prefix for
 * descending. `chooseWeightBy` picks proportionally to that key with a PRNG
 * seeded by the process id; empty string picks by a hash of the process id.
 */
export const loadBalanceSchema = z.strictObject({
  replicasLimit: z.number().int().min(1).max(10_000),
  sortBy: z.string().regex(/^-?[A-Za-z0-9._/-]{1,63}$/),
  chooseWeightBy: z.string().regex(/^([A-Za-z0-9._/-]{1,63})?$/),
});
export type LoadBalance = z.infer<typeof loadBalanceSchema>;

export const LOAD_BALANCE_DEFAULTS: LoadBalance = {
  replicasLimit: 16,
  sortBy: '-weight',
  chooseWeightBy: 'weight',
};

/** Body of `POST /api/schedule`. */
export const scheduleRequestSchema = z.strictObject({
  class: identityValueSchema,
  processId: identityValueSchema,
  threadId: identityValueSchema.optional(),
  /** Keep a process on the runtime that already holds it. Default true. */
  sticky: z.boolean().default(true),
  processSelector: z.array(ruleSchema).max(32).optional(),
  affinity: z.array(ruleSchema).max(32).optional(),
  loadBalance: loadBalanceSchema.partial().optional(),
  exclude: z.array(identityValueSchema).max(256).optional(),
  /** Return candidate ids per stage in the trace (slower; for `switchyard explain`). A dry run: nothing is recorded. */
  explain: z.boolean().optional(),
});
export type ScheduleRequestInput = z.input<typeof scheduleRequestSchema>;
export type ScheduleRequest = z.infer<typeof scheduleRequestSchema>;

/** Where a decision came from. */
export const SCHEDULE_SOURCES = ['thread', 'process', 'pipeline'] as const;
export type ScheduleSource = (typeof SCHEDULE_SOURCES)[number];

/** Pipeline stages a trace may list; a reader refuses a longer one at once rather than check each step. */
const TRACE_STEPS_MAX = 64;

/** One pipeline stage in a trace: how many candidates entered and left it. */
export const traceStepSchema = z.object({
  stage: z.string(),
  before: z.number(),
  after: z.number(),
  /** Candidate ids after the stage (runtimes of one epoch, at most), only when the request asked to `explain`. */
  candidates: listOf(z.string(), SNAPSHOT_RUNTIMES_MAX).readonly().optional(),
  note: z.string().optional(),
});
export type TraceStep = Readonly<z.infer<typeof traceStepSchema>>;

const traceSchema = listOf(traceStepSchema, TRACE_STEPS_MAX).readonly();

/** Why nothing could be chosen: the stage that emptied the set and its reason code. */
export const unschedulableSchema = z.object({ stage: z.string(), code: z.string(), message: z.string() });
export type Unschedulable = Readonly<z.infer<typeof unschedulableSchema>>;

/**
 * The pipeline's answer: a runtime, or why none. `source` is one of
 * `SCHEDULE_SOURCES`, read as any string: a reader of an answer from a later
 * release shows a source it does not know rather than refuse the answer.
 */
export const scheduleDecisionSchema = z.discriminatedUnion('ok', [
  z.object({ ok: z.literal(true), runtime: z.string(), source: z.string(), trace: traceSchema }),
  z.object({ ok: z.literal(false), unschedulable: unschedulableSchema, trace: traceSchema }),
]);
export type ScheduleDecision = z.infer<typeof scheduleDecisionSchema>;

/** What `POST /api/schedule` adds to a decision: the epoch it was made on and where to send traffic. */
export const scheduleAnswerFieldsSchema = z.object({
  epoch: z.number(),
  term: z.number(),
  /** Replica holding the chosen runtime's tunnel. */
  owner: z.string().optional(),
  /** `…/api/proxy/<runtime>` on the owner replica. */
  proxyUrl: z.string().optional(),
  /** Direct address the runtime advertised, if any. */
  address: z.string().optional(),
});

/**
 * Reply of `POST /api/schedule` (200 placed, 503 unschedulable): the decision
 * plus where to send traffic. Unknown fields are dropped, not refused.
 */
export const scheduleResponseSchema = scheduleDecisionSchema.and(scheduleAnswerFieldsSchema);
export type ScheduleResponse = z.infer<typeof scheduleResponseSchema>;
