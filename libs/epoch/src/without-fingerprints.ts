import type { ClusterOp, Runtime, RuntimeState, SyncMessage } from '@switchyard/protocol';

/**
 * `msg` as a peer that predates `Runtime.tokenFingerprint` accepts it: the field left out of every
 * runtime of a part or commit. Unchanged (the same object) when no runtime in it has one, so only
 * messages to such peers, during an upgrade, pay for the walk.
 */
export function withoutTokenFingerprints(msg: SyncMessage): SyncMessage {
  if (msg.type === 'collect') {
    const part = msg.part;
    if (part.kind === 'full') {
      const runtimes = strippedStates(part.runtimes);
      return runtimes === part.runtimes ? msg : { ...msg, part: { ...part, runtimes } };
    }
    const ops = strippedOps(part.ops);
    return ops === part.ops ? msg : { ...msg, part: { ...part, ops } };
  }
  if (msg.type !== 'commit') return msg;
  const body = msg.body;
  if (body.kind === 'snapshot') {
    const runtimes = strippedStates(body.snapshot.runtimes);
    return runtimes === body.snapshot.runtimes
      ? msg
      : { ...msg, body: { ...body, snapshot: { ...body.snapshot, runtimes } } };
  }
  const ops = strippedOps(body.ops);
  return ops === body.ops ? msg : { ...msg, body: { ...body, ops } };
}

function strippedStates(states: RuntimeState[]): RuntimeState[] {
  if (!states.some((s) => s.runtime.tokenFingerprint !== undefined)) return states;
  return states.map((s) => (s.runtime.tokenFingerprint === undefined ? s : { ...s, runtime: stripped(s.runtime) }));
}

function strippedOps(ops: ClusterOp[]): ClusterOp[] {
  const carries = (op: ClusterOp): boolean => op.op === 'runtime.upsert' && op.runtime.tokenFingerprint !== undefined;
  if (!ops.some(carries)) return ops;
  return ops.map((op) => (op.op === 'runtime.upsert' && carries(op) ? { ...op, runtime: stripped(op.runtime) } : op));
}

function stripped(runtime: Runtime): Runtime {
  const { tokenFingerprint: _left, ...older } = runtime;
  return older;
}
