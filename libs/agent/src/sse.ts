import { WATCH_EVENTS } from '@switchyard/protocol';
import type { RuntimeOp, WatchSnapshot } from '@switchyard/protocol';

/** One SSE event. JSON.stringify never emits a newline, so `data` stays one line. */
function event(name: string, id: number, data: unknown): string {
  return `event: ${name}\nid: ${id}\ndata: ${JSON.stringify(data)}\n\n`;
}

export function snapshotEvent(seq: number, snapshot: WatchSnapshot): string {
  return event(WATCH_EVENTS.snapshot, seq, snapshot);
}

export function deltaEvent(seq: number, ops: readonly RuntimeOp[]): string {
  return event(WATCH_EVENTS.delta, seq, { ops });
}

/** A comment line: ignored by clients, but traffic for proxies that cut silent streams. */
export const PING = ': ping\n\n';

/** Parses a `Last-Event-ID` value; undefined when absent or not a sequence number. */
export function parseLastEventId(value: string | string[] | undefined): number | undefined {
  const raw = Array.isArray(value) ? value[0] : value;
  if (raw === undefined || !/^\d{1,16}$/.test(raw.trim())) return undefined;
  const seq = Number(raw.trim());
  return Number.isSafeInteger(seq) ? seq : undefined;
}
