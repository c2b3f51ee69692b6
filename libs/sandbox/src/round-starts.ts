import { createHash } from 'node:crypto';

/** How many calls between rounds a host remembers the start of; past it, the oldest is forgotten first. */
export const CALLS_BETWEEN_ROUNDS_MAX = 1024;

/**
 * When each 2026-07-28 tool call now between rounds started, so that the
 * call is counted and timed once, at the round that settles it, from its
 * first round. A round answered `input_required` ends its request; the
 * client retries the call with the input asked for and the round's
 * `requestState`, echoed byte for byte, which is what ties the rounds
 * together here (kept as a digest: a state may be large).
 *
 * Not guaranteed: a round that names no `requestState`, a call whose next
 * round reaches another runtime or comes after 1,024 others paused on this
 * host, is timed from the round that resumes it; two calls of one class
 * paused on the same `requestState` share the start of the later; a call
 * its client abandons between rounds is never counted.
 */
export class RoundStarts {
  readonly #startMs = new Map<string, number>();

  /** A round of a call of `className` that started at `startMs` answered `input_required` with `requestState`. */
  pause(className: string, requestState: string, startMs: number): void {
    const key = digest(className, requestState);
    this.#startMs.delete(key);
    this.#startMs.set(key, startMs);
    if (this.#startMs.size > CALLS_BETWEEN_ROUNDS_MAX) this.#startMs.delete(this.#startMs.keys().next().value!);
  }

  /** When the call a round carrying `requestState` continues started; undefined for a first round. */
  resume(className: string, requestState: unknown): number | undefined {
    if (typeof requestState !== 'string') return undefined;
    const key = digest(className, requestState);
    const startMs = this.#startMs.get(key);
    this.#startMs.delete(key);
    return startMs;
  }
}

function digest(className: string, requestState: string): string {
  return createHash('sha256').update(className).update('\0').update(requestState).digest('base64url');
}
