import { WATCH_EVENTS } from '@switchyard/protocol';
import type { RuntimeOp, WatchSnapshot } from '@switchyard/protocol';

/** One SSE event. JSON.stringify never emits a newline, so `data` stays one line. */
function event(name: string, id: number, data: unknown): string {
  return `event: ${name}\nid: ${id}\ndata: ${JSON.stringify(data)}\n\n`;
}

export function snapshotEvent(seq: number, snapshot: WatchSnapshot): string {
  return event(WATCH_EVENTS.snapshot, seq, snapshot);
}

/**
 * `snapshot` as `snapshot-part` events of at most `entriesMax` processes and
 * threads each (processes first, in order), then the `snapshot-end`; all
 * with the id `seq`. Made one by one, so no text holds the whole state.
 */
export function* snapshotPartEvents(seq: number, snapshot: WatchSnapshot, entriesMax: number): Generator<string> {
  const { processes, threads, idleWeight, metadata } = snapshot;
  let part = 0;
  for (let start = 0; start < processes.length + threads.length; start += entriesMax, part++) {
    const end = start + entriesMax;
    yield event(WATCH_EVENTS.snapshotPart, seq, {
      part,
      processes: processes.slice(start, end),
      threads: threads.slice(Math.max(0, start - processes.length), Math.max(0, end - processes.length)),
    });
  }
  yield event(WATCH_EVENTS.snapshotEnd, seq, { parts: part, idleWeight, metadata });
}

export function deltaEvent(seq: number, ops: readonly RuntimeOp[]): string {
  return event(WATCH_EVENTS.delta, seq, { ops });
}

/** A comment line: ignored by clients, but traffic for proxies that cut silent streams. */
export const PING = ': ping\n\n';

/** True when a comma-separated features header (e.g. `WATCH_FEATURES_HEADER`) lists `feature`. */
export function listsFeature(header: string | string[] | undefined, feature: string): boolean {
  const value = Array.isArray(header) ? header.join(',') : (header ?? '');
  return value.split(',').some((listed) => listed.trim() === feature);
}

/** Parses a `Last-Event-ID` value; undefined when absent or not a sequence number. */
export function parseLastEventId(value: string | string[] | undefined): number | undefined {
  const raw = Array.isArray(value) ? value[0] : value;
  if (raw === undefined || !/^\d{1,16}$/.test(raw.trim())) return undefined;
  const seq = Number(raw.trim());
  return Number.isSafeInteger(seq) ? seq : undefined;
}
