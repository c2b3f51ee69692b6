import { SwitchyardError } from '@switchyard/protocol';

/** Defaults of the epoch sync state machines, in one place (design brief §6). */
export const EPOCH_DEFAULTS = {
  /** A cycle starts at least this often, change or not. */
  cycleIntervalMs: 1000,
  /** After `notifyChange`, wait this long for more changes before starting a cycle. */
  debounceMs: 20,
  /** A cycle commits with the parts it has once this has passed since its announce. */
  cycleTimeoutMs: 5000,
  /** Cycles announced but not yet committed; further triggers wait for a free slot. */
  maxInFlight: 5,
  /** Epochs whose full state stays available to `snapshotAt`. */
  keepEpochs: 5,
  /** A follower silent for this long has its runtimes committed as unavailable. */
  staleAfterMs: 10_000,
  /**
   * A follower detached this long is forgotten with its part: runtimes no
   * replica reports any more (gone with their replica) leave the epoch, so
   * the processes they held are placed anew instead of waiting for them.
   */
  forgetAfterMs: 300_000,
  /** Followers (attached or remembered for staleness) the leader tracks; the longest-detached is evicted. */
  followersMax: 256,
  /** Connections a follower keeps listening on (old leaders' included, for fencing). */
  connectionsMax: 4,
} as const;

/** Throws an `invalid_request` SwitchyardError unless `value` is an integer in `[min, ∞)`. */
export function checkInt(name: string, value: number, min: number): number {
  if (!Number.isInteger(value) || value < min) {
    throw new SwitchyardError('invalid_request', `${name} must be an integer >= ${min}, got ${value}`);
  }
  return value;
}
