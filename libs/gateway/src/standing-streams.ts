/**
 * A relay of a standing event stream, as StandingStreams lists it: the two
 * links are the list's (undefined while the relay is not listed).
 */
export interface StandingStream {
  older: StandingStream | undefined;
  newer: StandingStream | undefined;
  /** Ends the stream from the gateway's side (see Gateway.endEventStreams). */
  endStream(): void;
}

/**
 * The standing event streams a gateway relays (sessions' `GET` streams,
 * 2026-07-28 `subscriptions/listen`), for ending them all when it drains.
 * A list threaded through the relays themselves, two fields in each: a Set
 * of them (or of their responses, with a WeakMap from response to relay, as
 * before 2026-12-06) holds a hash table entry per stream, about 0.6 MB at
 * 10,000 streams, for a table read once, on SIGTERM.
 */
export class StandingStreams {
  /** The ring's anchor: its `newer` is the oldest stream listed, its `older` the newest. */
  readonly #anchor: StandingStream;
  #ended = false;

  constructor() {
    const anchor: StandingStream = { older: undefined, newer: undefined, endStream() {} };
    anchor.older = anchor.newer = anchor;
    this.#anchor = anchor;
  }

  /** Lists `stream` until `unlist`; once `endAll` has been called, ends it at once instead. */
  add(stream: StandingStream): void {
    if (this.#ended) return stream.endStream();
    const anchor = this.#anchor;
    const newest = anchor.older!;
    stream.older = newest;
    stream.newer = anchor;
    newest.newer = stream;
    anchor.older = stream;
  }

  /** Ends every stream listed, and every one added from now on. */
  endAll(): void {
    this.#ended = true;
    const anchor = this.#anchor;
    // Each turn takes one off (`add` no longer lists), so it ends.
    while (anchor.newer !== anchor) {
      const oldest = anchor.newer!;
      unlist(oldest);
      oldest.endStream();
    }
  }
}

/** Takes `stream` off the list it is on, if any. */
export function unlist(stream: StandingStream): void {
  const { older, newer } = stream;
  if (!older || !newer) return;
  older.newer = newer;
  newer.older = older;
  stream.older = stream.newer = undefined;
}
