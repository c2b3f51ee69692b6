import { systemClock } from '@switchyard/clock';
import type { Clock, Timer } from '@switchyard/clock';

/** How often a held token list is looked at; `secretSource` looks at its file no more often. */
export const REVOCATION_CHECK_MS = 1000;

export interface TokenRevocationsOptions {
  /** The tokens accepted now; a list keeps its identity until it changes (as `secretSource`'s does). */
  readonly tokens: () => readonly string[];
  readonly clock?: Clock;
  /** Default REVOCATION_CHECK_MS. */
  readonly checkEveryMs?: number;
  /** After a check that ended any holder, with how many it ended. */
  readonly onRevoked?: (ended: number) => void;
}

/**
 * A token is checked when a connection is admitted, but what it let in
 * can outlive it by days: a runtime's tunnel, a gateway's relay
 * connection, an event stream. So removing a token from its list ends what
 * it let in. Holders say how to tell whether they are still admitted and
 * how to end them; while any is held, the list is looked at every
 * `checkEveryMs`, and when it has changed, every holder it no longer
 * admits is ended.
 *
 * A list that comes back empty ends nothing: an empty list refuses every
 * new connection already, and more likely says a Secret is being replaced
 * (or a file cannot be read for a moment) than that every holder is
 * revoked; the first non-empty list after it is checked.
 */
export interface TokenRevocations {
  /**
   * Calls `end` once `stillAdmitted()` is false at a check: the first after
   * the hold, or one that finds the list changed. The returned release forgets the holder.
   */
  hold(stillAdmitted: () => boolean, end: () => void): () => void;
  /** Holders not yet ended or released. */
  readonly held: number;
  /** Ends nothing; stops watching. Idempotent. */
  close(): void;
}

interface Holder {
  readonly stillAdmitted: () => boolean;
  readonly end: () => void;
}

export function watchTokenRevocations(options: TokenRevocationsOptions): TokenRevocations {
  const clock = options.clock ?? systemClock;
  const checkEveryMs = options.checkEveryMs ?? REVOCATION_CHECK_MS;
  const holders = new Set<Holder>();
  let seen: readonly string[] = options.tokens();
  let timer: Timer | undefined;
  let closed = false;
  /** Held since the last check: admitted under a list the watch may have moved past (see hold). */
  let fresh: Holder[] = [];

  const check = (): void => {
    timer = undefined;
    const tokens = options.tokens();
    if (tokens.length > 0) {
      const changed = tokens !== seen;
      const asked = fresh;
      fresh = [];
      seen = tokens;
      let ended = 0;
      for (const holder of changed ? [...holders] : asked) {
        if (!holders.has(holder) || holder.stillAdmitted()) continue;
        holders.delete(holder);
        holder.end();
        ended++;
      }
      if (ended > 0) options.onRevoked?.(ended);
    }
    arm();
  };
  const arm = (): void => {
    // Released holders are not kept for a check that will not come.
    if (holders.size === 0) fresh = [];
    if (!closed && !timer && holders.size > 0) timer = clock.setTimeout(check, checkEveryMs);
  };

  return {
    hold(stillAdmitted, end) {
      const holder = { stillAdmitted, end };
      holders.add(holder);
      // Its token was checked at admission, which may lie before a change the
      // last check already saw: asked at the next check, changed list or not.
      fresh.push(holder);
      arm();
      return () => void holders.delete(holder);
    },
    get held() {
      return holders.size;
    },
    close() {
      closed = true;
      timer?.cancel();
      timer = undefined;
      holders.clear();
      fresh = [];
    },
  };
}
