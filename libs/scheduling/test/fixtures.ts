// Builders shared by the scheduling tests: terse runtime records and requests.
import type { Rule, Runtime, RuntimeState, ScheduleRequest } from '@switchyard/protocol';
import { toCandidate } from '@switchyard/scheduling';
import type { Candidate, FilterContext } from '@switchyard/scheduling';

export function runtime(id: string, extra: Partial<Runtime> = {}): Runtime {
  return {
    id,
    classes: ['default'],
    metadata: {},
    version: '1.0.0',
    idleWeight: { sandboxes: 4 },
    available: true,
    owner: 'replica-a',
    generation: 1,
    ...extra,
  };
}

export function state(rt: Runtime, processes: string[] = [], threads: [string, string][] = []): RuntimeState {
  return { runtime: rt, processes, threads: threads.map(([process, thread]) => ({ process, thread })) };
}

export function request(extra: Partial<ScheduleRequest> = {}): ScheduleRequest {
  return { class: 'default', processId: 'p1', sticky: true, ...extra };
}

export function candidates(...runtimes: Runtime[]): Candidate[] {
  return runtimes.map(toCandidate);
}

export function context(extra: Partial<ScheduleRequest> = {}, holders: string[] = []): FilterContext {
  return { request: request(extra), holders };
}

export const rule = (key: string, op: Rule['op'], value?: string): Rule =>
  value === undefined ? { key, op } : { key, op, value };

export const ids = (list: readonly Candidate[]): string[] => list.map((c) => c.id);
