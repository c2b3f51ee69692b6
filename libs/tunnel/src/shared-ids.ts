/** How long replacements of one runtime id are counted together. */
export const SHARED_ID_WINDOW_MS = 30_000;
/** Replacements within the window that say two runtimes share the id (a restart replaces once). */
const REPLACEMENTS_SUSPECT = 3;

/**
 * Tells when a runtime id is likely used by two runtimes at once. A newer
 * connection with an id replaces the older (a restarted runtime need not
 * wait for its old tunnel to time out), so two live runtimes with one id
 * (the default id is the host name) take turns replacing each other for as
 * long as both run, and the cluster sees the runtime come and go. An id
 * replaced three times within SHARED_ID_WINDOW_MS is reported, once per
 * window.
 */
export class SharedIds {
  readonly #seen = new Map<string, { since: number; count: number; reported: boolean }>();
  readonly #idsMax: number;

  /** `idsMax`: ids remembered at most (past it the memory starts over). */
  constructor(idsMax: number) {
    this.#idsMax = idsMax;
  }

  /** Counts a replacement of `id` at `now` (a `Clock.monotonicNow()` reading); true for the one to report. */
  replaced(id: string, now: number): boolean {
    let seen = this.#seen.get(id);
    if (!seen || now - seen.since > SHARED_ID_WINDOW_MS) {
      if (!seen && this.#seen.size >= this.#idsMax) this.#seen.clear();
      seen = { since: now, count: 0, reported: false };
      this.#seen.set(id, seen);
    }
    seen.count++;
    if (seen.count < REPLACEMENTS_SUSPECT || seen.reported) return false;
    seen.reported = true;
    return true;
  }
}
