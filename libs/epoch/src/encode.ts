import type { SyncMessage } from '@switchyard/protocol';

// A commit goes to every follower as the same object; serialising it once
// keeps a snapshot of a large fleet from costing one JSON.stringify per
// follower. Weak keys: entries go when the message does.
const encoded = new WeakMap<SyncMessage, string>();

/** The JSON text frame of `msg`, computed once per message object. */
export function encodeMessage(msg: SyncMessage): string {
  let text = encoded.get(msg);
  if (text === undefined) {
    text = JSON.stringify(msg);
    encoded.set(msg, text);
  }
  return text;
}

/**
 * UTF-8 size of `msg` on the wire, whole. A snapshot commit is counted runtime by runtime: as one string it may
 * pass V8's largest (about 512 M characters), and below that it would hold the whole state as one string, which
 * sending it in parts avoids.
 */
export function messageBytes(msg: SyncMessage): number {
  if (msg.type !== 'commit' || msg.body.kind !== 'snapshot') return Buffer.byteLength(encodeMessage(msg));
  const { runtimes } = msg.body.snapshot;
  const empty = { ...msg, body: { ...msg.body, snapshot: { ...msg.body.snapshot, runtimes: [] } } };
  let bytes = Buffer.byteLength(JSON.stringify(empty)) + Math.max(runtimes.length - 1, 0); // the commas between
  for (const state of runtimes) bytes += Buffer.byteLength(JSON.stringify(state));
  return bytes;
}
