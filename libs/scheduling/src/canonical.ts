import type { Runtime, RuntimeState, ThreadRef } from '@switchyard/protocol';

/**
 * Code-unit order of ids. Identity values are ASCII, so this is also the
 * byte order every replica (and every language) agrees on; `localeCompare`
 * would depend on the host's locale.
 */
export function compareIds(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

export function compareThreads(a: ThreadRef, b: ThreadRef): number {
  return compareIds(a.process, b.process) || compareIds(a.thread, b.thread);
}

/** Copy of `record` with keys in code-unit order, so equal records serialise equally. */
export function sortedRecord<V>(record: Readonly<Record<string, V>>): Record<string, V> {
  const out: Record<string, V> = {};
  for (const key of Object.keys(record).sort(compareIds)) out[key] = record[key]!;
  return out;
}

export function sameRecord<V>(a: Readonly<Record<string, V>>, b: Readonly<Record<string, V>>): boolean {
  const keys = Object.keys(a);
  if (keys.length !== Object.keys(b).length) return false;
  for (const key of keys) if (!Object.hasOwn(b, key) || a[key] !== b[key]) return false;
  return true;
}

/**
 * Records `canonicalRuntime` made. They are frozen, so they stay canonical:
 * passing one again returns it as is. Epoch merges and diffs see the same
 * records every cycle, and rebuilding each one dominated their cost.
 */
const canonicalRecords = new WeakSet<Runtime>();

/**
 * The canonical, frozen form of a runtime record: classes sorted and unique,
 * record keys sorted, no `address: undefined`. Two replicas that received
 * the same facts in a different order hold deep-equal (and equally
 * serialised) records.
 */
export function canonicalRuntime(runtime: Runtime): Runtime {
  if (canonicalRecords.has(runtime)) return runtime;
  const out: Runtime = {
    id: runtime.id,
    classes: Object.freeze([...new Set(runtime.classes)].sort(compareIds)) as string[],
    metadata: Object.freeze(sortedRecord(runtime.metadata)),
    version: runtime.version,
    idleWeight: Object.freeze(sortedRecord(runtime.idleWeight)),
    available: runtime.available,
    owner: runtime.owner,
    generation: runtime.generation,
  };
  if (runtime.ownerUrl !== undefined) out.ownerUrl = runtime.ownerUrl;
  if (runtime.address !== undefined) out.address = runtime.address;
  if (runtime.tokenFingerprint !== undefined) out.tokenFingerprint = runtime.tokenFingerprint;
  if (runtime.instance !== undefined) out.instance = runtime.instance;
  canonicalRecords.add(Object.freeze(out));
  return out;
}

/** True when the two records differ only in `available`, `idleWeight` and `metadata`. */
export function sameIdentity(a: Runtime, b: Runtime): boolean {
  return (
    a.id === b.id &&
    a.version === b.version &&
    a.owner === b.owner &&
    a.ownerUrl === b.ownerUrl &&
    a.generation === b.generation &&
    a.address === b.address &&
    a.tokenFingerprint === b.tokenFingerprint &&
    a.instance === b.instance &&
    a.classes.length === b.classes.length &&
    a.classes.every((c, i) => c === b.classes[i])
  );
}

/**
 * Which of two reports of the same runtime wins: the higher connection
 * generation, then the lexicographically higher owner. A full tie (the same
 * connection reported twice) falls back to the serialised canonical state so
 * the choice still does not depend on arrival order.
 */
export function preferState(a: RuntimeState, b: RuntimeState): RuntimeState {
  if (a.runtime.generation !== b.runtime.generation) return a.runtime.generation > b.runtime.generation ? a : b;
  if (a.runtime.owner !== b.runtime.owner) return a.runtime.owner > b.runtime.owner ? a : b;
  return stateKey(a) >= stateKey(b) ? a : b;
}

function stateKey(state: RuntimeState): string {
  return JSON.stringify([
    canonicalRuntime(state.runtime),
    [...state.processes].sort(compareIds),
    [...state.threads].sort(compareThreads),
  ]);
}
