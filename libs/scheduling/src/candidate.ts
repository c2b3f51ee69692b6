import type { Runtime } from '@switchyard/protocol';

/**
 * A runtime as the pipeline sees it: the record plus the two figures every
 * stage needs, computed once per change instead of once per decision.
 */
export interface Candidate {
  readonly id: string;
  readonly runtime: Runtime;
  /** Smallest idle-weight dimension; 0 when the runtime reports none. */
  readonly weight: number;
  /** Available and every idle-weight dimension > 0 (vacuously true with no dimensions). */
  readonly open: boolean;
}

export function smallestWeight(idleWeight: Readonly<Record<string, number>>): number {
  let min = Number.POSITIVE_INFINITY;
  for (const key in idleWeight) {
    const value = idleWeight[key]!;
    if (value < min) min = value;
  }
  return min === Number.POSITIVE_INFINITY ? 0 : min;
}

function isOpen(runtime: Runtime): boolean {
  if (!runtime.available) return false;
  for (const key in runtime.idleWeight) if (!(runtime.idleWeight[key]! > 0)) return false;
  return true;
}

/** Builds a candidate from a bare record (for callers and tests outside an index). */
export function toCandidate(runtime: Runtime): Candidate {
  return { id: runtime.id, runtime, weight: smallestWeight(runtime.idleWeight), open: isOpen(runtime) };
}

/**
 * One runtime inside a ClusterIndex. `procs` maps each process it holds to
 * the set of that process's threads (null while it has none): threads live
 * under their process, so a thread entry costs one Set slot plus its id and
 * the thread lookup needs no global "pid/tid" key strings.
 */
export class RuntimeEntry implements Candidate {
  readonly id: string;
  runtime: Runtime;
  weight: number;
  open: boolean;
  readonly procs = new Map<string, Set<string> | null>();

  constructor(runtime: Runtime) {
    this.id = runtime.id;
    this.runtime = runtime;
    this.weight = smallestWeight(runtime.idleWeight);
    this.open = isOpen(runtime);
  }

  setRuntime(runtime: Runtime): void {
    this.runtime = runtime;
    this.weight = smallestWeight(runtime.idleWeight);
    this.open = isOpen(runtime);
  }

  hasThread(processId: string, threadId: string): boolean {
    const threads = this.procs.get(processId);
    return threads !== undefined && threads !== null && threads.has(threadId);
  }
}
