/**
 * The pure scheduling core: the cluster snapshot index, snapshot merging and
 * diffing for epochs, and the deterministic filter/selector pipeline.
 * No I/O, no clock, no ambient randomness: every answer is a function of the
 * snapshot and the request.
 */
export { ClusterIndex } from './cluster-index.ts';
export type { ClusterCounts, RuntimeSummary } from './cluster-index.ts';
export { mergeParts, diffStates } from './merge.ts';
export { applyOps } from './apply.ts';
export { schedule } from './schedule.ts';
export type { ScheduleOptions } from './schedule.ts';
export { toCandidate } from './candidate.ts';
export type { Candidate } from './candidate.ts';
export type { OpenView } from './sorted.ts';
export {
  STAGES,
  REASONS,
  excludeFilter,
  processStickyFilter,
  availabilityFilter,
  affinityFilter,
  processSelectorFilter,
} from './filters.ts';
export type { Reason, Filter, FilterContext, FilterStatus } from './filters.ts';
export { deterministicSelector, hashId } from './selector.ts';
export type { Selector, SelectStatus } from './selector.ts';
export { matchesRule, latestVersion, applyRules } from './rules.ts';
export type { RulesOutcome } from './rules.ts';
