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

/** UTF-8 size of `msg` on the wire. */
export function messageBytes(msg: SyncMessage): number {
  return Buffer.byteLength(encodeMessage(msg));
}
