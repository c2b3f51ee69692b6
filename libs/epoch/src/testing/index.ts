/**
 * Test helpers of epoch sync: an in-memory connection pair and small
 * reference merge/diff/apply functions (naive, for tests and benches only;
 * production wires the scheduling lib's), and a runtime state to feed them.
 */
export { MemoryLink, MemoryConnection } from './memory.ts';
export type { LinkEvent, Side } from './memory.ts';
export { referenceMerge, referenceDiff, referenceApply, canonicalStates } from './reference.ts';
export { runtimeState } from './states.ts';
