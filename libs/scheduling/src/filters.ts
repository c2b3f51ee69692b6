import { runtimeStateOf, type ScheduleRequest } from '@switchyard/protocol';
import type { Candidate } from './candidate.ts';
import { applyRules, describeRule } from './rules.ts';
import type { OpenView } from './sorted.ts';

/** Stage names as they appear in traces and `Unschedulable.stage`. */
export const STAGES = {
  threadFastPath: 'ThreadFastPath',
  class: 'Class',
  exclude: 'Exclude',
  processSticky: 'ProcessSticky',
  availability: 'Availability',
  affinity: 'Affinity',
  processSelector: 'ProcessSelector',
  deterministicSelector: 'DeterministicSelector',
} as const;

/** Rejection reason codes (`Unschedulable.code`); stable strings other components may match on. */
export const REASONS = {
  noRuntimeForClass: 'no_runtime_for_class',
  allExcluded: 'all_excluded',
  holdersNotCandidates: 'holders_not_candidates',
  noneAvailable: 'none_available',
  affinityMismatch: 'affinity_mismatch',
  selectorMismatch: 'selector_mismatch',
  noCandidates: 'no_candidates',
} as const;
export type Reason = (typeof REASONS)[keyof typeof REASONS];

/** What every stage sees besides the candidates. */
export interface FilterContext {
  readonly request: ScheduleRequest;
  /** Ids of the runtimes holding the process (snapshot plus pending), sorted. */
  readonly holders: readonly string[];
  /**
   * Optional precomputed open subset of the class (see `OpenView`). Stages
   * use it only when it was computed from exactly the list they are given,
   * and answer the same with or without it; it only saves time.
   */
  readonly open?: OpenView;
}

/** A stage's verdict: the survivors, or why none survived. Never thrown. */
export type FilterStatus =
  | { readonly ok: true; readonly candidates: readonly Candidate[]; readonly note?: string }
  | { readonly ok: false; readonly code: Reason; readonly message: string };

/**
 * One pipeline stage that narrows the candidate set. A filter is a pure
 * function of its inputs, never throws, keeps the input order, and answers
 * unschedulable exactly when it leaves no candidate.
 */
export interface Filter {
  readonly stage: string;
  filter(candidates: readonly Candidate[], context: FilterContext): FilterStatus;
}

const fail = (code: Reason, stage: string, why: string): FilterStatus => ({
  ok: false,
  code,
  message: `${stage}: ${why}`,
});

/** Filters without allocating when every candidate passes (the common case on a healthy fleet). */
function keep(candidates: readonly Candidate[], pass: (c: Candidate) => boolean): readonly Candidate[] {
  let i = 0;
  while (i < candidates.length && pass(candidates[i]!)) i++;
  if (i === candidates.length) return candidates;
  const out = candidates.slice(0, i);
  for (i++; i < candidates.length; i++) if (pass(candidates[i]!)) out.push(candidates[i]!);
  return out;
}

/** Drops the runtimes the request excludes (e.g. one that just failed to dial). */
export const excludeFilter: Filter = {
  stage: STAGES.exclude,
  filter(candidates, { request }) {
    const exclude = request.exclude ?? [];
    const out = exclude.length === 0 ? candidates : keep(candidates, (c) => !exclude.includes(c.id));
    if (out.length > 0) return { ok: true, candidates: out };
    if (candidates.length === 0) return fail(REASONS.noCandidates, STAGES.exclude, 'no candidates to start from');
    return fail(REASONS.allExcluded, STAGES.exclude, `all ${candidates.length} candidates are excluded by the request`);
  },
};

/** A sticky request for a process that lives somewhere may only go there. */
export const processStickyFilter: Filter = {
  stage: STAGES.processSticky,
  filter(candidates, { request, holders }) {
    if (candidates.length === 0) return fail(REASONS.noCandidates, STAGES.processSticky, 'no candidates to start from');
    if (!request.sticky) return { ok: true, candidates, note: 'not sticky' };
    if (holders.length === 0) return { ok: true, candidates, note: 'process held nowhere' };
    const out = keep(candidates, (c) => holders.includes(c.id));
    if (out.length > 0) return { ok: true, candidates: out, note: 'kept holders' };
    return fail(
      REASONS.holdersNotCandidates,
      STAGES.processSticky,
      `process ${request.processId} is held by ${holders.join(', ')}, none of which is a candidate (excluded or not serving class ${request.class})`,
    );
  },
};

/**
 * Keeps available runtimes with idle weight in every dimension. A saturated
 * runtime that already holds the process passes: its sandbox exists, the
 * request adds no new one.
 */
export const availabilityFilter: Filter = {
  stage: STAGES.availability,
  filter(candidates, { holders, open }) {
    if (open !== undefined && open.of === candidates && holders.length === 0 && open.entries.length > 0) {
      return { ok: true, candidates: open.entries };
    }
    const out = keep(candidates, (c) => c.open || (c.runtime.available && holders.includes(c.id)));
    if (out.length > 0) return { ok: true, candidates: out };
    if (candidates.length === 0) return fail(REASONS.noCandidates, STAGES.availability, 'no candidates to start from');
    const states = { available: 0, draining: 0, unavailable: 0 };
    for (const c of candidates) states[runtimeStateOf(c.runtime)]++;
    return fail(
      REASONS.noneAvailable,
      STAGES.availability,
      `none of ${candidates.length} candidates can take work (${states.unavailable} unavailable, ` +
        `${states.draining} draining, ${states.available} saturated in some idle-weight dimension)`,
    );
  },
};

/** The request's affinity rules, AND-ed (see `applyRules`). */
export const affinityFilter: Filter = {
  stage: STAGES.affinity,
  filter(candidates, { request }) {
    if (candidates.length === 0) return fail(REASONS.noCandidates, STAGES.affinity, 'no candidates to start from');
    const rules = request.affinity ?? [];
    if (rules.length === 0) return { ok: true, candidates };
    const { candidates: out, failed } = applyRules(candidates, rules);
    if (failed === undefined) return { ok: true, candidates: out };
    return fail(
      REASONS.affinityMismatch,
      STAGES.affinity,
      `no candidate of ${candidates.length} satisfies affinity rule ${describeRule(failed)}`,
    );
  },
};

/**
 * Holders must match the process selector; those that do not are dropped,
 * while runtimes that do not hold the process are not judged by it.
 */
export const processSelectorFilter: Filter = {
  stage: STAGES.processSelector,
  filter(candidates, { request, holders }) {
    if (candidates.length === 0)
      return fail(REASONS.noCandidates, STAGES.processSelector, 'no candidates to start from');
    const rules = request.processSelector ?? [];
    if (rules.length === 0 || holders.length === 0) return { ok: true, candidates };
    const held = candidates.filter((c) => holders.includes(c.id));
    if (held.length === 0) return { ok: true, candidates };
    const { candidates: matching, failed } = applyRules(held, rules);
    const out = keep(candidates, (c) => !holders.includes(c.id) || matching.includes(c));
    if (out.length > 0) return { ok: true, candidates: out, note: `${held.length - matching.length} holders dropped` };
    return fail(
      REASONS.selectorMismatch,
      STAGES.processSelector,
      `holders of process ${request.processId} do not match selector rule ${describeRule(failed!)} and no other candidate remains`,
    );
  },
};
