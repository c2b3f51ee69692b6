import { STORE_DEFAULTS } from '@switchyard/agent';

/**
 * What a replica mirrors of one runtime by default: what the reference runtime's own store holds at most, so a
 * well-behaved runtime never passes it, far under the protocol's ceilings (`RUNTIME_LIMITS`), which no replica's
 * memory holds (about 350 MB per million threads of 128-character ids).
 */
export const RUNTIME_STATE_DEFAULTS = {
  processesMax: STORE_DEFAULTS.processesMax,
  threadsMax: STORE_DEFAULTS.threadsMax,
} as const;
