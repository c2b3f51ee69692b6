import type { WebSocket } from 'ws';
import { parseWith, syncMessageSchema } from '@switchyard/protocol';
import type { SyncMessage } from '@switchyard/protocol';
import { encodeMessage } from './encode.ts';
import type { SyncConnection } from './types.ts';

export interface WsSyncConnectionOptions {
  /** Above this many queued bytes `send` refuses (returns false). Default 8 MiB. */
  readonly bufferedBytesMax?: number;
  /** Messages that may wait for an `onMessage` handler; past it the connection closes (1008). Default 1024. */
  readonly pendingMessagesMax?: number;
  /**
   * Whether the peer reads an `error`'s `latestEpoch` (it advertised `SYNC_FEATURES.latestEpoch`). When
   * false the field is left out: a peer of an older version validates strictly and would close on it.
   * Default true.
   */
  readonly peerReadsLatestEpoch?: boolean;
}

export const WS_SYNC_DEFAULTS = { bufferedBytesMax: 8 * 1024 * 1024, pendingMessagesMax: 1024 } as const;

/** Close code for a message that breaks the sync protocol (RFC 6455 policy violation). */
export const CLOSE_POLICY = 1008;
/** RFC 6455 caps a close reason at 123 bytes. */
const REASON_BYTES_MAX = 123;

/** Cuts `reason` to what a close frame may carry, on a character boundary. */
export function closeReason(reason: string): string {
  let out = reason;
  while (Buffer.byteLength(out) > REASON_BYTES_MAX) out = out.slice(0, -1);
  return out;
}

/**
 * A SyncConnection over an open `ws` WebSocket: JSON text frames, each
 * inbound one validated with `syncMessageSchema`. A frame that is binary,
 * not JSON or not a valid message closes this connection with 1008 and a
 * reason naming the offending field; nothing reaches the handler.
 * `send` refuses while `ws.bufferedAmount` exceeds `bufferedBytesMax`, so
 * the buffer grows at most by one message past the bound.
 */
export function wsSyncConnection(ws: WebSocket, options: WsSyncConnectionOptions = {}): SyncConnection {
  const { bufferedBytesMax, pendingMessagesMax } = { ...WS_SYNC_DEFAULTS, ...options };
  const forPeer = options.peerReadsLatestEpoch === false ? withoutLatestEpoch : (msg: SyncMessage) => msg;
  let handler: ((msg: SyncMessage) => void) | undefined;
  let closeHandler: ((code: number, reason: string) => void) | undefined;
  let closed: { code: number; reason: string } | undefined;
  const pending: SyncMessage[] = [];

  const close = (code: number, reason: string): void => {
    if (ws.readyState === ws.CLOSING || ws.readyState === ws.CLOSED) return;
    ws.close(code, closeReason(reason));
  };
  const refuse = (reason: string): void => close(CLOSE_POLICY, reason);

  ws.on('message', (data, isBinary) => {
    if (closed || ws.readyState !== ws.OPEN) return;
    if (isBinary) return refuse('binary frames are not accepted');
    let value: unknown;
    try {
      value = JSON.parse(data.toString());
    } catch {
      return refuse('message is not JSON');
    }
    const parsed = parseWith(syncMessageSchema, value);
    if (!parsed.ok) return refuse(`invalid sync message: ${parsed.error}`);
    if (handler) return handler(parsed.value);
    if (pending.length >= pendingMessagesMax) return refuse('too many messages before a handler');
    pending.push(parsed.value);
  });
  // 'error' is always followed by 'close'; the listener keeps it from throwing.
  ws.on('error', () => {});
  ws.on('close', (code, reason) => {
    if (closed) return;
    closed = { code, reason: reason.toString() };
    pending.length = 0;
    closeHandler?.(closed.code, closed.reason);
  });

  return {
    send(msg) {
      if (closed || ws.readyState !== ws.OPEN || ws.bufferedAmount > bufferedBytesMax) return false;
      ws.send(encodeMessage(forPeer(msg)));
      return true;
    },
    onMessage(cb) {
      handler = cb;
      for (const msg of pending.splice(0)) cb(msg);
    },
    onClose(cb) {
      closeHandler = cb;
      if (closed) queueMicrotask(() => cb(closed!.code, closed!.reason));
    },
    close,
    get bufferedBytes() {
      return ws.bufferedAmount;
    },
    peerReadsLatestEpoch: options.peerReadsLatestEpoch !== false,
  };
}

/** `msg` as a peer that predates `error.latestEpoch` accepts it. */
function withoutLatestEpoch(msg: SyncMessage): SyncMessage {
  if (msg.type !== 'error' || msg.latestEpoch === undefined) return msg;
  const { latestEpoch: _omitted, ...older } = msg;
  return older;
}
