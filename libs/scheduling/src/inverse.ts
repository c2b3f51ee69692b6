import type { ClusterOp } from '@switchyard/protocol';
import type { RuntimeEntry } from './candidate.ts';
import { compareIds } from './canonical.ts';

/** Ops that restore what a process.remove (or runtime.remove) takes away from `entry`. */
function restoreProcess(entry: RuntimeEntry, process: string): ClusterOp[] {
  const runtimeId = entry.id;
  const threads = entry.procs.get(process);
  const ops: ClusterOp[] = [{ op: 'process.add', runtimeId, process }];
  if (threads) {
    for (const thread of [...threads].sort(compareIds)) ops.push({ op: 'thread.add', runtimeId, process, thread });
  }
  return ops;
}

/**
 * The ops that undo `op`, given the runtime's entry before `op` is applied
 * (undefined when the runtime is unknown). An op that would change nothing
 * has an empty inverse.
 */
export function inverseOf(op: ClusterOp, entry: RuntimeEntry | undefined): ClusterOp[] {
  if (op.op === 'runtime.upsert') {
    return entry === undefined
      ? [{ op: 'runtime.remove', runtimeId: op.runtime.id }]
      : [{ op: 'runtime.upsert', runtime: entry.runtime }];
  }
  if (entry === undefined) return [];
  const runtimeId = entry.id;
  switch (op.op) {
    case 'runtime.remove': {
      const ops: ClusterOp[] = [{ op: 'runtime.upsert', runtime: entry.runtime }];
      for (const process of [...entry.procs.keys()].sort(compareIds)) ops.push(...restoreProcess(entry, process));
      return ops;
    }
    case 'runtime.available':
      return [{ op: 'runtime.available', runtimeId, available: entry.runtime.available }];
    case 'process.add':
      return entry.procs.has(op.process) ? [] : [{ op: 'process.remove', runtimeId, process: op.process }];
    case 'process.remove':
      return entry.procs.has(op.process) ? restoreProcess(entry, op.process) : [];
    case 'thread.add':
      if (!entry.procs.has(op.process)) return [{ op: 'process.remove', runtimeId, process: op.process }];
      if (entry.hasThread(op.process, op.thread)) return [];
      return [{ op: 'thread.remove', runtimeId, process: op.process, thread: op.thread }];
    case 'thread.remove':
      if (!entry.hasThread(op.process, op.thread)) return [];
      return [{ op: 'thread.add', runtimeId, process: op.process, thread: op.thread }];
    case 'weight':
      return [{ op: 'weight', runtimeId, idleWeight: entry.runtime.idleWeight }];
    case 'metadata':
      return [{ op: 'metadata', runtimeId, metadata: entry.runtime.metadata }];
  }
}
