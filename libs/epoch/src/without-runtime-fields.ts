import type { ClusterOp, Runtime, RuntimeState, SyncMessage } from '@switchyard/protocol';

/** Optional runtime fields that only peers listing them in `SYNC_FEATURES_HEADER` read (see `SYNC_FEATURES`). */
export type PeerRuntimeField = 'tokenFingerprint' | 'instance';

/**
 * `msg` as a peer that predates the runtime `fields` accepts it: those left out of every runtime of a
 * part or commit. Unchanged (the same object) when no runtime in it has one, so only messages to such
 * peers, during an upgrade, pay for the walk.
 */
export function withoutRuntimeFields(msg: SyncMessage, fields: readonly PeerRuntimeField[]): SyncMessage {
  if (fields.length === 0) return msg;
  const carries = (runtime: Runtime): boolean => fields.some((field) => runtime[field] !== undefined);
  const stripped = (runtime: Runtime): Runtime => {
    const older = { ...runtime };
    for (const field of fields) delete older[field];
    return older;
  };
  const strippedStates = (states: RuntimeState[]): RuntimeState[] => {
    if (!states.some((s) => carries(s.runtime))) return states;
    return states.map((s) => (carries(s.runtime) ? { ...s, runtime: stripped(s.runtime) } : s));
  };
  const strippedOps = (ops: ClusterOp[]): ClusterOp[] => {
    const upsertCarries = (op: ClusterOp): boolean => op.op === 'runtime.upsert' && carries(op.runtime);
    if (!ops.some(upsertCarries)) return ops;
    return ops.map((op) =>
      op.op === 'runtime.upsert' && carries(op.runtime) ? { ...op, runtime: stripped(op.runtime) } : op,
    );
  };
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
