import { LOAD_BALANCE_DEFAULTS } from '@switchyard/protocol';
import type { LoadBalance } from '@switchyard/protocol';
import seedrandom from 'seedrandom';
import type { Candidate } from './candidate.ts';
import { REASONS, STAGES } from './filters.ts';
import type { FilterContext, Reason } from './filters.ts';
import { topCandidates, weightBy } from './ranking.ts';

/** The final stage's verdict: one runtime, or why none (only when given no candidates). */
export type SelectStatus =
  | { readonly ok: true; readonly candidate: Candidate; readonly ranked: readonly Candidate[]; readonly note: string }
  | { readonly ok: false; readonly code: Reason; readonly message: string };

/** The last pipeline stage: picks one runtime out of the survivors. Pure; never throws. */
export interface Selector {
  readonly stage: string;
  select(candidates: readonly Candidate[], context: FilterContext): SelectStatus;
}

/** The request's load-balance settings with the protocol defaults filled in. */
export function loadBalanceOf(context: FilterContext): LoadBalance {
  const lb = context.request.loadBalance;
  if (lb === undefined) return LOAD_BALANCE_DEFAULTS;
  return {
    replicasLimit: lb.replicasLimit ?? LOAD_BALANCE_DEFAULTS.replicasLimit,
    sortBy: lb.sortBy ?? LOAD_BALANCE_DEFAULTS.sortBy,
    chooseWeightBy: lb.chooseWeightBy ?? LOAD_BALANCE_DEFAULTS.chooseWeightBy,
  };
}

/** 32-bit FNV-1a of a string: a stable hash every replica and language computes alike. */
export function hashId(value: string): number {
  let hash = 0x811c9dc5;
  for (let i = 0; i < value.length; i++) {
    hash ^= value.charCodeAt(i);
    hash = Math.imul(hash, 0x01000193);
  }
  return hash >>> 0;
}

/**
 * Sorts by `sortBy` (ties by runtime id, holders first), cuts to
 * `replicasLimit`, then picks proportionally to `chooseWeightBy` with a PRNG
 * seeded by the process id; with `chooseWeightBy` empty, or when every
 * weight is 0, it picks by a hash of the process id. Either way the same
 * process id and candidate set always give the same runtime.
 */
export const deterministicSelector: Selector = {
  stage: STAGES.deterministicSelector,
  select(candidates, context) {
    if (candidates.length === 0) {
      return {
        ok: false,
        code: REASONS.noCandidates,
        message: `${STAGES.deterministicSelector}: no candidates to start from`,
      };
    }
    const { replicasLimit, sortBy, chooseWeightBy } = loadBalanceOf(context);
    const ranked = topCandidates(candidates, context.holders, sortBy, replicasLimit, context.open);
    const processId = context.request.processId;
    let total = 0;
    if (chooseWeightBy !== '') for (const c of ranked) total += weightBy(c, chooseWeightBy);
    if (total <= 0) {
      const candidate = ranked[hashId(processId) % ranked.length]!;
      return { ok: true, candidate, ranked, note: 'picked by process id hash' };
    }
    // alea: seeded from a string in well under a microsecond, unlike the ARC4 default.
    let point = seedrandom.alea(processId)() * total;
    let candidate: Candidate | undefined;
    for (const c of ranked) {
      const weight = weightBy(c, chooseWeightBy);
      if (weight <= 0) continue;
      candidate = c; // the last positive one absorbs floating-point residue
      point -= weight;
      if (point < 0) break;
    }
    return { ok: true, candidate: candidate!, ranked, note: `picked by ${chooseWeightBy} of ${ranked.length}` };
  },
};
