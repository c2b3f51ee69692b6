import { z } from 'zod';
import { identityValueSchema } from './identity.ts';

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
export type ScheduleSource = 'thread' | 'process' | 'pipeline';

/** One pipeline stage in a trace: how many candidates entered and left it. */
export interface TraceStep {
  readonly stage: string;
  readonly before: number;
  readonly after: number;
  /** Candidate ids after the stage, only when the request asked to `explain`. */
  readonly candidates?: readonly string[];
  readonly note?: string;
}

/** Why nothing could be chosen: the stage that emptied the set and its reason code. */
export interface Unschedulable {
  readonly stage: string;
  readonly code: string;
  readonly message: string;
}

export type ScheduleDecision =
  | {
      readonly ok: true;
      readonly runtime: string;
      readonly source: ScheduleSource;
      readonly trace: readonly TraceStep[];
    }
  | { readonly ok: false; readonly unschedulable: Unschedulable; readonly trace: readonly TraceStep[] };

/** Reply of `POST /api/schedule`: the decision plus where to send traffic. */
export type ScheduleResponse = ScheduleDecision & {
  readonly epoch: number;
  readonly term: number;
  /** Replica holding the chosen runtime's tunnel. */
  readonly owner?: string;
  /** `…/api/proxy/<runtime>` on the owner replica. */
  readonly proxyUrl?: string;
  /** Direct address the runtime advertised, if any. */
  readonly address?: string;
};
