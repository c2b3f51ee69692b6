import type { ScheduleDecision, ScheduleRequest, TraceStep } from '@switchyard/protocol';
import type { Candidate } from './candidate.ts';
import { compareIds } from './canonical.ts';
import { indexClassEntries, indexClassOpen, indexEntry, indexHeld } from './cluster-index.ts';
import type { ClusterIndex } from './cluster-index.ts';
import {
  REASONS,
  STAGES,
  affinityFilter,
  availabilityFilter,
  excludeFilter,
  processSelectorFilter,
  processStickyFilter,
} from './filters.ts';
import type { Filter, FilterContext } from './filters.ts';
import { deterministicSelector } from './selector.ts';

/** Inputs to `schedule` besides the snapshot and the request. */
export interface ScheduleOptions {
  /**
   * Placements decided since the snapshot was taken and not yet reported
   * back by their runtime: process id → runtime id. They count as holders,
   * so a burst of requests for a new process lands on one runtime before the
   * next epoch shows it there. Entries naming unknown runtimes are ignored,
   * and so are those naming a runtime the request excludes: a request is
   * placed again with the runtime excluded when it could not be sent there
   * (not dialled, or the runtime full), so the process never reached it.
   */
  readonly pending?: ReadonlyMap<string, string>;
}

const FILTERS: readonly Filter[] = [
  excludeFilter,
  processStickyFilter,
  availabilityFilter,
  affinityFilter,
  processSelectorFilter,
];

function holdersOf(index: ClusterIndex, request: ScheduleRequest, options: ScheduleOptions | undefined) {
  const holders = index.holdersOf(request.processId);
  const pending = options?.pending?.get(request.processId);
  if (pending === undefined || holders.includes(pending) || request.exclude?.includes(pending)) return holders;
  if (indexEntry(index, pending) === undefined) return holders;
  return [...holders, pending].sort(compareIds);
}

function step(stage: string, before: number, after: readonly Candidate[], explain: boolean, note?: string): TraceStep {
  const out: { stage: string; before: number; after: number; candidates?: string[]; note?: string } = {
    stage,
    before,
    after: after.length,
  };
  if (explain) out.candidates = after.map((c) => c.id);
  if (note !== undefined) out.note = note;
  return out;
}

// The trace of a fast-path hit is the same for every request (without
// explain), so it is shared and frozen rather than built per decision.
const THREAD_HIT: readonly TraceStep[] = Object.freeze([
  Object.freeze({ stage: STAGES.threadFastPath, before: 1, after: 1 }),
]);

/**
 * The thread fast path: an existing session goes back to the runtime serving
 * it, if that runtime is available and not excluded. Returns the decision,
 * or a note saying why the pipeline must run.
 */
function fromThread(index: ClusterIndex, request: ScheduleRequest, threadId: string): ScheduleDecision | string {
  const held = indexHeld(index, request.processId);
  if (held === undefined) return 'no thread entry';
  let note = 'no thread entry';
  for (let i = 0; i < held.ids.length; i++) {
    if (held.threads[i]?.has(threadId) !== true) continue;
    const id = held.ids[i]!;
    const entry = held.entries[i]!;
    if (!entry.runtime.available) note = `thread on ${id}, which is unavailable`;
    else if (request.exclude !== undefined && request.exclude.includes(id)) note = `thread on ${id}, which is excluded`;
    else {
      const trace = request.explain === true ? [step(STAGES.threadFastPath, 1, [entry], true)] : THREAD_HIT;
      return { ok: true, runtime: id, source: 'thread', trace };
    }
  }
  return note;
}

/**
 * Decides which runtime serves a request, from one snapshot.
 *
 * Order: thread fast path → Class → Exclude → ProcessSticky → Availability →
 * Affinity → ProcessSelector → DeterministicSelector (see each stage's doc).
 * `request` must have passed `scheduleRequestSchema` (defaults applied).
 *
 * Guarantees: pure and deterministic — the same snapshot facts and request
 * give the same decision on every replica, whatever the insertion order;
 * never throws for a valid request; failures are values naming the stage
 * that emptied the set and a `REASONS` code. The trace has one step per
 * stage run, with candidate ids only when `request.explain` is set.
 *
 * Not guaranteed: that the runtime still has room when traffic arrives, or
 * that two requests for a new process land together when the snapshot
 * changes between them (pass `pending` to pin the first placement).
 */
export function schedule(index: ClusterIndex, request: ScheduleRequest, options?: ScheduleOptions): ScheduleDecision {
  const explain = request.explain === true;
  const trace: TraceStep[] = [];
  if (request.threadId !== undefined) {
    const fast = fromThread(index, request, request.threadId);
    if (typeof fast !== 'string') return fast;
    trace.push(step(STAGES.threadFastPath, 0, [], explain, fast));
  }
  let candidates: readonly Candidate[] = indexClassEntries(index, request.class);
  trace.push(step(STAGES.class, index.counts().runtimes, candidates, explain));
  if (candidates.length === 0) {
    const message = `${STAGES.class}: no runtime serves class ${request.class}`;
    return { ok: false, unschedulable: { stage: STAGES.class, code: REASONS.noRuntimeForClass, message }, trace };
  }
  const context: FilterContext = {
    request,
    holders: holdersOf(index, request, options),
    open: indexClassOpen(index, request.class),
  };
  for (const filter of FILTERS) {
    const status = filter.filter(candidates, context);
    if (!status.ok) {
      trace.push(step(filter.stage, candidates.length, [], explain));
      return { ok: false, unschedulable: { stage: filter.stage, code: status.code, message: status.message }, trace };
    }
    trace.push(step(filter.stage, candidates.length, status.candidates, explain, status.note));
    candidates = status.candidates;
  }
  const picked = deterministicSelector.select(candidates, context);
  if (!picked.ok) {
    const unschedulable = { stage: deterministicSelector.stage, code: picked.code, message: picked.message };
    return { ok: false, unschedulable, trace };
  }
  trace.push(step(deterministicSelector.stage, candidates.length, [picked.candidate], explain, picked.note));
  const id = picked.candidate.id;
  return { ok: true, runtime: id, source: context.holders.includes(id) ? 'process' : 'pipeline', trace };
}
