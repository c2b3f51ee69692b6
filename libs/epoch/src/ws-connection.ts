import type { WebSocket } from 'ws';
import { SYNC_OPS_MAX, parseWith, syncFrameSchema } from '@switchyard/protocol';
import type { SyncFrame, SyncMessage } from '@switchyard/protocol';
import { encodeMessage } from './encode.ts';
import { PartsAssembler, RUN_TOO_BIG } from './parts-assembler.ts';
import { partFrames } from './parts-writer.ts';
import { withoutRuntimeFields, type PeerRuntimeField } from './without-runtime-fields.ts';
import type { SyncConnection } from './types.ts';

export interface WsSyncConnectionOptions {
  /**
   * Above this many queued bytes `send` refuses (returns false), and a run of parts waits to write its next
   * part; also the most that messages sent during a run may take, waiting behind it. Default 8 MiB.
   */
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
   * Whether the peer reads a runtime's `instance` (it advertised `SYNC_FEATURES.instance`). When false the
   * field is left out of every part and commit sent: a peer of an older version (one that reads fingerprints
   * included) validates strictly and would close on it. Default true.
   */
  readonly peerReadsInstance?: boolean;
  /**
   * Whether the peer reads runs of parts (it advertised `SYNC_FEATURES.parts`). When true, a snapshot commit
   * or full collect above `partBytes` goes as a run of `part` frames and its end; when false it goes whole,
   * as to a peer of an earlier release. Default true.
   */
  readonly peerReadsParts?: boolean;
  /**
   * Largest part of a run, in bytes. Default the smaller of `payloadBytesMax` and 4 MiB: a message of a large
   * fleet then goes in parts even below the frame limit, so neither side holds it as one string.
   */
  readonly partBytes?: number;
  /**
   * Largest run of parts taken, in bytes: its frames together. A run above it closes the connection with 1008
   * before the rest is read, so what a peer makes this side hold for a run it never ends is bounded. Replicas of
   * one cluster must share it, like `payloadBytesMax`. Default `WS_SYNC_DEFAULTS.runBytesMax`.
   */
  readonly runBytesMax?: number;
  /**
   * The inbound frame limit the socket was opened with (`maxPayload`). A frame above it closes the
   * connection, reported as 1009 naming the limit (`ws` itself reports a bare 1006). Peers of a cluster share
   * it, so an outbound frame above it is one the peer refuses: `onLargeFrame` hears of it, with its size.
   */
  readonly payloadBytesMax?: number;
  /** An outbound frame of `bytes` above `payloadBytesMax` was sent (the peer closes on it if it shares the limit). */
  readonly onLargeFrame?: (bytes: number, payloadBytesMax: number) => void;
  /**
   * This side closed the connection on what the peer sent: 1008 with the reason whole (a malformed message, a run
   * of parts out of order or above `runBytesMax`, whose reason starts `CLOSE_REASON_RUN_TOO_BIG`), or 1009 (a
   * frame above `payloadBytesMax`). Not called for a close the peer or the user started.
   */
  readonly onRefuse?: (code: number, reason: string) => void;
}

export const WS_SYNC_DEFAULTS = {
  bufferedBytesMax: 8 * 1024 * 1024,
  pendingMessagesMax: 1024,
  /** Largest part of a run, unless `payloadBytesMax` is smaller. */
  partBytes: 4 * 1024 * 1024,
  /**
   * Largest run taken (512 MiB of frames): eight times the default frame limit, the most a whole message of a
   * large fleet took before runs, and a state that a replica's heap still holds several times over as objects.
   */
  runBytesMax: 512 * 1024 * 1024,
} as const;

/** Close code for a message that breaks the sync protocol (RFC 6455 policy violation). */
export const CLOSE_POLICY = 1008;
/** Close code for a frame above the receiver's limit (RFC 6455 message too big). */
export const CLOSE_TOO_BIG = 1009;
/** Starts the reason of the 1008 that closes a run of parts above `runBytesMax`, on either side. */
export const CLOSE_REASON_RUN_TOO_BIG = `run of parts: ${RUN_TOO_BIG}`;
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
 * inbound one validated with `syncFrameSchema`. A frame that is binary,
 * not JSON or not a valid message closes this connection with 1008 and a
 * reason naming the offending field; nothing reaches the handler.
 * A run of parts reaches the handler as the one message it makes, at its
 * end, once complete and in order; a run out of order (see `syncPartSchema`)
 * closes the connection with 1008 like a malformed frame, and a close
 * mid-run drops its parts. Sent, a run goes out a part at a time, each
 * once `ws.bufferedAmount` is back within `bufferedBytesMax`; messages sent
 * meanwhile (`backlogged`) wait behind it, encoded, and follow its last
 * frame in order, so none comes between its frames. They take at most
 * `bufferedBytesMax`: past it `send` refuses, and refuses every later one
 * until the run is out, so none overtakes a refused one. A snapshot commit
 * or full collect is refused meanwhile. A close mid-run drops the rest,
 * and what waits behind it.
 * `send` refuses while `ws.bufferedAmount` exceeds `bufferedBytesMax`, so
 * the buffer grows at most by one message (or part, or what waited behind
 * a run) past the bound.
 */
export function wsSyncConnection(ws: WebSocket, options: WsSyncConnectionOptions = {}): SyncConnection {
  const { bufferedBytesMax, pendingMessagesMax, runBytesMax } = { ...WS_SYNC_DEFAULTS, ...options };
  const { payloadBytesMax, onLargeFrame, onRefuse } = options;
  const partBytes = options.partBytes ?? Math.min(payloadBytesMax ?? Infinity, WS_SYNC_DEFAULTS.partBytes);
  const parts = new PartsAssembler(runBytesMax);
  const unread: PeerRuntimeField[] = [];
  if (options.peerReadsTokenFingerprint === false) unread.push('tokenFingerprint');
  if (options.peerReadsInstance === false) unread.push('instance');
  const forPeer = (msg: SyncMessage): SyncMessage => {
    const older = options.peerReadsLatestEpoch === false ? withoutLatestEpoch(msg) : msg;
    return withoutRuntimeFields(older, unread);
  };
  let handler: ((msg: SyncMessage) => void) | undefined;
  let closeHandler: ((code: number, reason: string) => void) | undefined;
  let closed: { code: number; reason: string } | undefined;
  let refusedTooBig = false;
  const pending: SyncMessage[] = [];
  /**
   * The run going out: its frames (shared by every connection that sends the message), the next to write, and
   * the messages sent meanwhile (`refused` once one was not taken), which follow its last frame.
   */
  let run: { readonly frames: readonly string[]; next: number; behind: Behind } | undefined;

  const close = (code: number, reason: string): void => {
    if (ws.readyState === ws.CLOSING || ws.readyState === ws.CLOSED) return;
    ws.close(code, closeReason(reason));
  };
  const refuse = (reason: string): void => {
    if (ws.readyState === ws.OPEN) onRefuse?.(CLOSE_POLICY, reason);
    close(CLOSE_POLICY, reason);
  };

  ws.on('message', (data, isBinary) => {
    if (closed || ws.readyState !== ws.OPEN) return;
    if (isBinary) return refuse('binary frames are not accepted');
    let value: unknown;
    try {
      value = JSON.parse(data.toString());
    } catch {
      return refuse('message is not JSON');
    }
    const parsed = parseWith(syncFrameSchema, value);
    if (!parsed.ok) return refuse(`invalid sync message: ${parsed.error}`);
    const msg = messageOf(parsed.value, Array.isArray(data) ? data.reduce((n, b) => n + b.length, 0) : data.byteLength);
    if (typeof msg === 'string') return refuse(msg);
    if (msg === undefined) return;
    if (handler) return handler(msg);
    if (pending.length >= pendingMessagesMax) return refuse('too many messages before a handler');
    pending.push(msg);
  });
  /** The message a frame of `bytes` makes, none yet (a part), or why it breaks the run of parts. */
  const messageOf = (frame: SyncFrame, bytes: number): SyncMessage | string | undefined => {
    if (frame.type === 'part') {
      const problem = parts.add(frame, bytes);
      return problem === undefined ? undefined : `run of parts: ${problem}`;
    }
    if (frame.type === 'commit-end' || frame.type === 'collect-end') {
      const run = parts.finish(frame);
      return run.ok ? run.msg : `run of parts: ${run.error}`;
    }
    return parts.pending ? `run of parts: a ${frame.type} within a run of parts` : frame;
  };
  // A UTF-8 byte is at most 3 per UTF-16 unit: most frames are told small without counting their bytes.
  const aboveLimit = (text: string): boolean =>
    payloadBytesMax !== undefined && text.length * 3 > payloadBytesMax && Buffer.byteLength(text) > payloadBytesMax;
  const sendText = (text: string, written?: (error?: Error) => void): void => {
    ws.send(text, written);
    if (onLargeFrame && aboveLimit(text)) onLargeFrame(Buffer.byteLength(text), payloadBytesMax!);
  };
  // Each part written calls back once flushed to the socket: the buffer has room again for the next one. One
  // queued as a whole would hold the run in this process once per peer that needs it.
  const pump = (): void => {
    while (run && !closed && ws.readyState === ws.OPEN && ws.bufferedAmount <= bufferedBytesMax) {
      const { frames, behind } = run;
      const text = frames[run.next++]!;
      if (run.next < frames.length) {
        sendText(text, (error) => !error && pump());
        continue;
      }
      run = undefined;
      sendText(text);
      for (const waited of behind.texts) sendText(waited);
    }
  };
  /** Writes `msg` now: a run of parts, or one frame; false for a delta the peer would refuse. */
  const write = (msg: SyncMessage): boolean => {
    const encoded = encode(msg);
    if (encoded === undefined) return false;
    if (typeof encoded === 'string') sendText(encoded);
    else {
      run = { frames: encoded, next: 0, behind: { texts: [], bytes: 0, refused: false } };
      pump();
    }
    return true;
  };
  /** Queues `msg` behind the run going out; false for a whole state, a delta the peer would refuse, or past the bound. */
  const queueBehind = (behind: Behind, msg: SyncMessage): boolean => {
    // A whole state may make a run, which cannot wait behind another: refused before it is encoded, which for a
    // large fleet is what a leader would otherwise pay at every cycle a follower waits for a snapshot.
    if (isWholeState(msg)) return false;
    const text = encode(msg);
    if (typeof text !== 'string') return false;
    const bytes = Buffer.byteLength(text);
    if (behind.bytes + bytes > bufferedBytesMax) return false;
    behind.texts.push(text);
    behind.bytes += bytes;
    return true;
  };
  /** The frames of a run, the one frame `msg` goes in, or undefined for a delta the peer would refuse. */
  const encode = (msg: SyncMessage): readonly string[] | string | undefined => {
    const peerMsg = forPeer(msg);
    const readsParts = options.peerReadsParts !== false;
    const frames = readsParts ? partFrames(peerMsg, partBytes) : undefined;
    if (frames) return frames;
    // Deltas stay whole. One the peer refuses would close the connection: refused here, it makes the leader
    // send that epoch as a snapshot, and a follower its full part, in parts. Above SYNC_OPS_MAX ops every peer
    // refuses it, and is better served whole; above the frame limit a peer of an earlier release takes neither,
    // and gets it as before.
    const ops = deltaOps(msg);
    if (ops !== undefined && ops > SYNC_OPS_MAX) return undefined;
    const text = encodeMessage(peerMsg);
    return readsParts && ops !== undefined && aboveLimit(text) ? undefined : text;
  };
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
    parts.reset();
    run = undefined;
    if (refusedTooBig) onRefuse?.(closed.code, closed.reason);
    closeHandler?.(closed.code, closed.reason);
  });

  return {
    send(msg) {
      if (closed || ws.readyState !== ws.OPEN) return false;
      // During a run the buffer is held near the bound by the run itself: what is sent meanwhile waits behind it.
      if (!run) return ws.bufferedAmount <= bufferedBytesMax && write(msg);
      const { behind } = run;
      const taken = !behind.refused && queueBehind(behind, msg);
      // None may overtake one refused: a leader's announce must not pass the snapshot or delta refused before it.
      if (!taken) behind.refused = true;
      return taken;
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
    get backlogged() {
      return run !== undefined;
    },
    peerReadsLatestEpoch: options.peerReadsLatestEpoch !== false,
  };
}

/** Messages sent during a run, encoded, with their bytes; `refused` once one was not taken. */
interface Behind {
  readonly texts: string[];
  bytes: number;
  refused: boolean;
}

/** A snapshot commit or full collect: what goes as a run of parts when it is large. */
function isWholeState(msg: SyncMessage): boolean {
  return (
    (msg.type === 'commit' && msg.body.kind === 'snapshot') || (msg.type === 'collect' && msg.part.kind === 'full')
  );
}

/** How many ops a commit or collect delta carries (it goes whole); undefined for any other message. */
function deltaOps(msg: SyncMessage): number | undefined {
  if (msg.type === 'commit' && msg.body.kind === 'delta') return msg.body.ops.length;
  if (msg.type === 'collect' && msg.part.kind === 'delta') return msg.part.ops.length;
  return undefined;
}

/** `msg` as a peer that predates `error.latestEpoch` accepts it. */
function withoutLatestEpoch(msg: SyncMessage): SyncMessage {
  if (msg.type !== 'error' || msg.latestEpoch === undefined) return msg;
  const { latestEpoch: _omitted, ...older } = msg;
  return older;
}
