import type { EventStore, JSONRPCMessage } from '@modelcontextprotocol/server';

/**
 * One legacy session's SSE history, so a client that lost a stream can
 * resume it with `Last-Event-ID`. Bounded by count and by size: the oldest
 * events are dropped past `eventsMax` events or `bytesMax` bytes of JSON (an
 * event bigger than `bytesMax` is not kept at all), and a resume from a
 * dropped id replays nothing (the client then only sees new events).
 *
 * No `getStreamIdForEventId`: given one, the SDK refuses (409) a resume of a
 * stream it still holds open; without it, the resume takes the stream's
 * place and the older connection ends. A client resumes only once it gave
 * up on that connection, which the runtime may not know of for minutes (a
 * peer that vanished without a FIN): see McpEndpoint's takeover of GET streams.
 */
export class SessionEventStore implements EventStore {
  readonly #eventsMax: number;
  readonly #bytesMax: number;
  readonly #events = new Map<string, { streamId: string; message: JSONRPCMessage; bytes: number }>();
  #bytes = 0;
  #seq = 0;

  constructor(eventsMax: number, bytesMax: number) {
    this.#eventsMax = eventsMax;
    this.#bytesMax = bytesMax;
  }

  async storeEvent(streamId: string, message: JSONRPCMessage): Promise<string> {
    // Ids carry the stream so a resume knows its stream even after eviction.
    const id = `${streamId}_${++this.#seq}`;
    // A count alone lets tool results of megabytes each pile up to gigabytes in one session.
    const bytes = Buffer.byteLength(JSON.stringify(message));
    this.#events.set(id, { streamId, message, bytes });
    this.#bytes += bytes;
    while (this.#events.size > this.#eventsMax || this.#bytes > this.#bytesMax) {
      const [oldest, event] = this.#events.entries().next().value!;
      this.#events.delete(oldest);
      this.#bytes -= event.bytes;
    }
    return id;
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
