import type { ServerEvent, ServerEventBus } from '@modelcontextprotocol/server';

/**
 * The change-event bus behind the runtime's 2026-07-28 `subscriptions/listen`
 * streams, shared by all sandboxes but never mixing them: the SDK registers
 * each stream while serving its request, so the stream is filed under the
 * sandbox that request is for (`current`, read from the request's async
 * context), and `publishTo` reaches only that sandbox's streams. The SDK's
 * listen router then filters by each stream's own request and stamps it.
 */
export class SandboxEventBus<Key extends object> implements ServerEventBus {
  readonly #streams = new Map<Key, Set<(event: ServerEvent) => void>>();
  readonly #current: () => Key | undefined;

  constructor(current: () => Key | undefined) {
    this.#current = current;
  }

  /** To every open stream of `key`'s sandbox. */
  publishTo(key: Key, event: ServerEvent): void {
    for (const listener of [...(this.#streams.get(key) ?? [])]) {
      try {
        listener(event);
      } catch {
        // One stream's failure is its own; the others still get the event.
      }
    }
  }

  /** To every open stream of every sandbox (the bus contract; the runtime itself publishes per sandbox). */
  publish(event: ServerEvent): void {
    for (const key of [...this.#streams.keys()]) this.publishTo(key, event);
  }

  subscribe(listener: (event: ServerEvent) => void): () => void {
    const key = this.#current();
    // A stream outside any sandbox's request cannot be told anything.
    if (key === undefined) return () => {};
    let streams = this.#streams.get(key);
    if (!streams) this.#streams.set(key, (streams = new Set()));
    streams.add(listener);
    return () => {
      if (!streams.delete(listener) || streams.size > 0) return;
      if (this.#streams.get(key) === streams) this.#streams.delete(key);
    };
  }
}
