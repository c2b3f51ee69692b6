import type { WebSocket } from 'ws';
import { parseWith, syncMessageSchema } from '@switchyard/protocol';
import type { SyncMessage } from '@switchyard/protocol';
import { encodeMessage } from './encode.ts';
import { withoutTokenFingerprints } from './without-fingerprints.ts';
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
  /**
   * Whether the peer reads a runtime's `tokenFingerprint` (it advertised `SYNC_FEATURES.tokenFingerprint`).
   * When false the field is left out of every part and commit sent: a peer of an older version validates
   * strictly and would close on it. Default true.
   */
  readonly peerReadsTokenFingerprint?: boolean;
  /**
   * The inbound frame limit the socket was opened with (`maxPayload`). A frame above it closes the
   * connection, reported as 1009 naming the limit (`ws` itself reports a bare 1006). Peers of a cluster share
   * it, so an outbound frame above it is one the peer refuses: `onLargeFrame` hears of it, with its size.
   */
  readonly payloadBytesMax?: number;
  /** An outbound frame of `bytes` above `payloadBytesMax` was sent (the peer closes on it if it shares the limit). */
  readonly onLargeFrame?: (bytes: number, payloadBytesMax: number) => void;
}

export const WS_SYNC_DEFAULTS = { bufferedBytesMax: 8 * 1024 * 1024, pendingMessagesMax: 1024 } as const;

/** Close code for a message that breaks the sync protocol (RFC 6455 policy violation). */
export const CLOSE_POLICY = 1008;
/** Close code for a frame above the receiver's limit (RFC 6455 message too big). */
export const CLOSE_TOO_BIG = 1009;
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
  const { payloadBytesMax, onLargeFrame } = options;
  const forPeer = (msg: SyncMessage): SyncMessage => {
    const older = options.peerReadsLatestEpoch === false ? withoutLatestEpoch(msg) : msg;
    return options.peerReadsTokenFingerprint === false ? withoutTokenFingerprints(older) : older;
  };
  let handler: ((msg: SyncMessage) => void) | undefined;
  let closeHandler: ((code: number, reason: string) => void) | undefined;
  let closed: { code: number; reason: string } | undefined;
  let refusedTooBig = false;
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
  ws.on('error', (error: Error & { code?: string }) => {
    if (error.code === 'WS_ERR_UNSUPPORTED_MESSAGE_LENGTH') refusedTooBig = true;
  });
  ws.on('close', (code, reason) => {
    if (closed) return;
    // ws drops the socket on a frame above maxPayload and reports 1006, which says nothing of why.
    closed = refusedTooBig
      ? { code: CLOSE_TOO_BIG, reason: `a frame exceeded the limit of ${payloadBytesMax ?? '?'} bytes` }
      : { code, reason: reason.toString() };
    pending.length = 0;
    closeHandler?.(closed.code, closed.reason);
  });

  return {
    send(msg) {
      if (closed || ws.readyState !== ws.OPEN || ws.bufferedAmount > bufferedBytesMax) return false;
      const text = encodeMessage(forPeer(msg));
      ws.send(text);
      // A UTF-8 byte is at most 3 per UTF-16 unit: most frames are told small without counting their bytes.
      if (onLargeFrame && payloadBytesMax !== undefined && text.length * 3 > payloadBytesMax) {
        const bytes = Buffer.byteLength(text);
        if (bytes > payloadBytesMax) onLargeFrame(bytes, payloadBytesMax);
      }
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
