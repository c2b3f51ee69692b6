import type { RuntimeState } from '@switchyard/protocol';
import type { SnapshotReason, SyncConnection } from './types.ts';

/** What the leader knows of one follower replica. Times are `Clock.monotonicNow()` readings. */
export interface FollowerSlot {
  readonly replica: string;
  /** Undefined while detached; the part stays until it goes stale. */
  conn: SyncConnection | undefined;
  part: readonly RuntimeState[] | undefined;
  /** Version of `part`; undefined until a full part arrives on the current connection. */
  partVersion: number | undefined;
  lastCollectMs: number;
  detachedAtMs: number | undefined;
  /** Why it waits for a snapshot, if it does: deltas are useless to it until it has one. */
  needsSnapshot: Extract<SnapshotReason, 'attached' | 'asked'> | undefined;
  /**
   * The latest epoch its connection took, as a snapshot or a delta; undefined until one (on this connection).
   * Messages arrive in order, so it is the base of the next delta the follower can apply.
   */
  sentEpoch: number | undefined;
  /** Snapshots it got for being `behind` since it last took a delta (on this connection). */
  behindInARow: number;
  /** Memo of the part marked unavailable, so an unchanged stale part keeps its identity. */
  stale: { readonly of: readonly RuntimeState[]; readonly states: readonly RuntimeState[] } | undefined;
}

export function newSlot(replica: string, nowMs: number): FollowerSlot {
  return {
    replica,
    conn: undefined,
    part: undefined,
    partVersion: undefined,
    lastCollectMs: nowMs,
    detachedAtMs: undefined,
    needsSnapshot: 'attached',
    sentEpoch: undefined,
    behindInARow: 0,
    stale: undefined,
  };
}

/**
 * The part as it enters the merge: as reported, or with every runtime
 * unavailable once the follower has been silent for `staleAfterMs`.
 */
export function effectivePart(slot: FollowerSlot, nowMs: number, staleAfterMs: number): readonly RuntimeState[] {
  const part = slot.part ?? [];
  if (nowMs - slot.lastCollectMs <= staleAfterMs) return part;
  if (slot.stale?.of !== part) {
    const states = part.map((s) => (s.runtime.available ? { ...s, runtime: { ...s.runtime, available: false } } : s));
    slot.stale = { of: part, states };
  }
  return slot.stale.states;
}

/** Makes room for one more slot: evicts the longest-detached one, or returns false when all are attached. */
export function makeRoom(slots: Map<string, FollowerSlot>, max: number): boolean {
  if (slots.size < max) return true;
  let victim: FollowerSlot | undefined;
  for (const slot of slots.values()) {
    if (slot.conn || slot.detachedAtMs === undefined) continue;
    if (!victim || slot.detachedAtMs < victim.detachedAtMs!) victim = slot;
  }
  if (!victim) return false;
  slots.delete(victim.replica);
  return true;
}
