import type { EventStore, JSONRPCMessage } from '@modelcontextprotocol/server';

/**
 * One legacy session's SSE history, so a client that lost a stream can
 * resume it with `Last-Event-ID`. Bounded: the oldest events are dropped
 * past `eventsMax`, and a resume from a dropped id replays nothing (the
 * client then only sees new events).
 */
export class SessionEventStore implements EventStore {
  readonly #eventsMax: number;
  readonly #events = new Map<string, { streamId: string; message: JSONRPCMessage }>();
  #seq = 0;

  constructor(eventsMax: number) {
    this.#eventsMax = eventsMax;
  }

  async storeEvent(streamId: string, message: JSONRPCMessage): Promise<string> {
    // Ids carry the stream so a resume knows its stream even after eviction.
    const id = `${streamId}_${++this.#seq}`;
    this.#events.set(id, { streamId, message });
    if (this.#events.size > this.#eventsMax) this.#events.delete(this.#events.keys().next().value!);
    return id;
  }

  async getStreamIdForEventId(eventId: string): Promise<string | undefined> {
    return this.#events.get(eventId)?.streamId ?? streamOf(eventId);
  }

  async replayEventsAfter(
    lastEventId: string,
    { send }: { send: (eventId: string, message: JSONRPCMessage) => Promise<void> },
  ): Promise<string> {
    const streamId = this.#events.get(lastEventId)?.streamId ?? streamOf(lastEventId) ?? '';
    let after = false;
    for (const [id, event] of [...this.#events]) {
      if (id === lastEventId) after = true;
      else if (after && event.streamId === streamId) await send(id, event.message);
    }
    return streamId;
  }
}

function streamOf(eventId: string): string | undefined {
  const at = eventId.lastIndexOf('_');
  return at > 0 ? eventId.slice(0, at) : undefined;
}
