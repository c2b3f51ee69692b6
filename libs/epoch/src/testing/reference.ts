import type { ClusterOp, Runtime, RuntimeState, ThreadRef } from '@switchyard/protocol';

// Naive but correct stand-ins for the scheduling lib's mergeParts /
// diffStates / ClusterIndex, so epoch sync can be tested and benchmarked on
// its own. Unchanged runtimes keep object identity through apply and merge,
// which lets diff skip them: cost follows the change, not the fleet.

const threadKey = (t: ThreadRef): string => `${t.process}/${t.thread}`;
const byId = (a: RuntimeState, b: RuntimeState): number =>
  a.runtime.id < b.runtime.id ? -1 : a.runtime.id > b.runtime.id ? 1 : 0;

/** Higher generation wins; on a tie the lower owner id, so every replica picks alike. */
function wins(a: Runtime, b: Runtime): boolean {
  return a.generation !== b.generation ? a.generation > b.generation : a.owner < b.owner;
}

export function referenceMerge(parts: ReadonlyArray<readonly RuntimeState[]>): RuntimeState[] {
  const out = new Map<string, RuntimeState>();
  for (const part of parts) {
    for (const state of part) {
      const seen = out.get(state.runtime.id);
      if (!seen || wins(state.runtime, seen.runtime)) out.set(state.runtime.id, state);
    }
  }
  return [...out.values()].sort(byId);
}

function sameRuntime(a: Runtime, b: Runtime): boolean {
  return JSON.stringify(canonical(a)) === JSON.stringify(canonical(b));
}

export function referenceDiff(prev: readonly RuntimeState[], next: readonly RuntimeState[]): ClusterOp[] {
  const before = new Map(prev.map((s) => [s.runtime.id, s]));
  const ops: ClusterOp[] = [];
  const nextIds = new Set<string>();
  for (const n of [...next].sort(byId)) {
    const id = n.runtime.id;
    nextIds.add(id);
    const p = before.get(id);
    if (p === n) continue;
    if (!p) {
      ops.push({ op: 'runtime.upsert', runtime: n.runtime });
      for (const process of n.processes) ops.push({ op: 'process.add', runtimeId: id, process });
      for (const t of n.threads) ops.push({ op: 'thread.add', runtimeId: id, ...t });
      continue;
    }
    if (!sameRuntime(p.runtime, n.runtime)) {
      const onlyAvailability = sameRuntime({ ...p.runtime, available: n.runtime.available }, n.runtime);
      ops.push(
        onlyAvailability
          ? { op: 'runtime.available', runtimeId: id, available: n.runtime.available }
          : { op: 'runtime.upsert', runtime: n.runtime },
      );
    }
    const nextThreads = new Set(n.threads.map(threadKey));
    const prevThreads = new Set(p.threads.map(threadKey));
    const nextProcs = new Set(n.processes);
    const prevProcs = new Set(p.processes);
    for (const t of p.threads)
      if (!nextThreads.has(threadKey(t))) ops.push({ op: 'thread.remove', runtimeId: id, ...t });
    for (const x of p.processes) if (!nextProcs.has(x)) ops.push({ op: 'process.remove', runtimeId: id, process: x });
    for (const x of n.processes) if (!prevProcs.has(x)) ops.push({ op: 'process.add', runtimeId: id, process: x });
    for (const t of n.threads) if (!prevThreads.has(threadKey(t))) ops.push({ op: 'thread.add', runtimeId: id, ...t });
  }
  for (const p of [...prev].sort(byId)) {
    if (!nextIds.has(p.runtime.id)) ops.push({ op: 'runtime.remove', runtimeId: p.runtime.id });
  }
  return ops;
}

interface Draft {
  runtime: Runtime;
  processes: Set<string>;
  threads: Map<string, ThreadRef>;
}

/** Applies ops copy-on-write: untouched runtimes are returned as the same objects. */
export function referenceApply(states: readonly RuntimeState[], ops: readonly ClusterOp[]): RuntimeState[] {
  const current = new Map(states.map((s) => [s.runtime.id, s]));
  const drafts = new Map<string, Draft | undefined>();
  const draft = (id: string): Draft | undefined => {
    if (drafts.has(id)) return drafts.get(id);
    const s = current.get(id);
    const d = s && {
      runtime: s.runtime,
      processes: new Set(s.processes),
      threads: new Map(s.threads.map((t) => [threadKey(t), t])),
    };
    drafts.set(id, d);
    return d;
  };
  for (const op of ops) {
    if (op.op === 'runtime.upsert') {
      const d = draft(op.runtime.id);
      if (d) d.runtime = op.runtime;
      else drafts.set(op.runtime.id, { runtime: op.runtime, processes: new Set(), threads: new Map() });
      continue;
    }
    if (op.op === 'runtime.remove') {
      drafts.set(op.runtimeId, undefined);
      current.delete(op.runtimeId);
      continue;
    }
    const d = draft(op.runtimeId);
    if (!d) continue;
    switch (op.op) {
      case 'runtime.available':
        d.runtime = { ...d.runtime, available: op.available };
        break;
      case 'weight':
        d.runtime = { ...d.runtime, idleWeight: op.idleWeight };
        break;
      case 'metadata':
        d.runtime = { ...d.runtime, metadata: op.metadata };
        break;
      case 'process.add':
        d.processes.add(op.process);
        break;
      case 'process.remove':
        d.processes.delete(op.process);
        for (const [key, t] of d.threads) if (t.process === op.process) d.threads.delete(key);
        break;
      case 'thread.add':
        d.threads.set(threadKey(op), { process: op.process, thread: op.thread });
        break;
      case 'thread.remove':
        d.threads.delete(threadKey(op));
        break;
    }
  }
  for (const [id, d] of drafts) {
    if (!d) current.delete(id);
    else current.set(id, { runtime: d.runtime, processes: [...d.processes], threads: [...d.threads.values()] });
  }
  return [...current.values()].sort(byId);
}

function canonical(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(canonical);
  if (value && typeof value === 'object') {
    const entries = Object.entries(value).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return Object.fromEntries(entries.map(([k, v]) => [k, canonical(v)]));
  }
  return value;
}

/** An order-independent rendering of a cluster state, for equality checks in tests. */
export function canonicalStates(states: readonly RuntimeState[]): string {
  const sorted = [...states].sort(byId).map((s) => ({
    runtime: canonical(s.runtime),
    processes: [...s.processes].sort(),
    threads: s.threads.map(threadKey).sort(),
  }));
  return JSON.stringify(sorted);
}
