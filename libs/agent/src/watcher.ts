import { EventSource } from 'eventsource';
import { systemClock } from '@switchyard/clock';
import type { Clock, Timer } from '@switchyard/clock';
import {
  SwitchyardError,
  WATCH_EVENTS,
  WATCH_FEATURES,
  WATCH_FEATURES_HEADER,
  WATCH_LIMITS,
  parseWith,
  watchDeltaSchema,
  watchSnapshotEndSchema,
  watchSnapshotPartSchema,
  watchSnapshotSchema,
} from '@switchyard/protocol';
import type { RuntimeOp, WatchSnapshot } from '@switchyard/protocol';
import { SnapshotAssembler } from './snapshot-parts.ts';
import { parseLastEventId } from './sse.ts';

/** The `fetch` shape the watcher needs: the global one, or one that tunnels. */
export type WatchFetch = (input: string | URL, init: RequestInit) => Promise<Response>;

export interface WatchRuntimeOptions {
  /** The runtime's `/watch` URL. */
  readonly url: string | URL;
  /** Performs every request, e.g. over the tunnel; `globalThis.fetch` works over plain HTTP. */
  readonly fetch: WatchFetch;
  /**
   * A full state: replace what you had. A snapshot sent in parts comes here
   * once, when its last part arrived and validated; until then the previous
   * state stands.
   */
  readonly onSnapshot: (snapshot: WatchSnapshot) => void;
  /** Ordered changes to the state of the last snapshot or ops. */
  readonly onOps: (ops: RuntimeOp[]) => void;
  /** Disconnects, malformed events and failures of the callbacks; the watcher reconnects after each. */
  readonly onError?: (error: SwitchyardError) => void;
  /** Delay before a reconnect. Default 1,000 ms. */
  readonly reconnectMs?: number;
  /**
   * A stream that brings no byte for this long — no answer, no event, not even
   * the `: ping` a runtime sends after 15 s of silence — is taken for stalled:
   * reported, dropped and resumed from `lastEventId`. Default 45,000 ms.
   */
  readonly idleTimeoutMs?: number;
  /** Time source of the reconnect delay and the idle timeout. Default: the system clock. */
  readonly clock?: Clock;
  /**
   * Characters one event (or one line) may take before it is complete. A runtime
   * that sends more has its stream closed, reported as `body_too_large`, and is
   * asked again only after `oversizeReconnectMs`: unbounded, the parser would hold
   * whatever the runtime sends, on every reconnect. Default
   * `WATCH_LIMITS.eventCharsMax` (32 Mi characters).
   */
  readonly eventCharsMax?: number;
  /**
   * Distinct processes (a thread's process counts) and threads a snapshot sent
   * in parts may make, as the parts come: past either, the parts gathered are
   * dropped, the stream closed, reported as `capacity_exhausted`, and asked
   * again only after `oversizeReconnectMs`. Give the limits `onSnapshot` keeps
   * to (e.g. RuntimeMirror's): a snapshot it would refuse is not worth
   * gathering. Default `RUNTIME_LIMITS.processesMax` and `threadsMax`.
   */
  readonly processesMax?: number;
  /** See `processesMax`. */
  readonly threadsMax?: number;
  /**
   * Delay before a reconnect after an event over `eventCharsMax`, or a
   * snapshot past the limits (here, or thrown by `onSnapshot` as
   * `capacity_exhausted`). Default 30,000 ms.
   */
  readonly oversizeReconnectMs?: number;
  /** Resume after this event id (a previous watcher's `lastEventId`) instead of starting with a snapshot. */
  readonly lastEventId?: string;
}

/** A running watch. */
export interface RuntimeWatcher {
  /** Id of the last event applied; sent as `Last-Event-ID` when reconnecting. */
  readonly lastEventId: string | undefined;
  /** True while a stream is open. */
  readonly connected: boolean;
  /** Stops for good. Idempotent; no callback runs afterwards. */
  close(): void;
}

/** Defaults of `watchRuntime`, with units in the names. */
export const WATCHER_DEFAULTS = {
  reconnectMs: 1_000,
  idleTimeoutMs: 45_000,
  eventCharsMax: WATCH_LIMITS.eventCharsMax,
  oversizeReconnectMs: 30_000,
} as const;

/**
 * Follows a runtime's `/watch` stream with `eventsource`, validating every
 * event with the protocol schemas. It asks for snapshots in parts
 * (`WATCH_FEATURES.snapshotParts`), so a state bigger than one event
 * (`eventCharsMax`) still syncs, and takes them whole from a runtime that
 * sends them so. Guarantees: callbacks see a gapless
 * sequence — a snapshot, then deltas whose ids follow one another — and after
 * a disconnect, or `idleTimeoutMs` without a byte, the watcher resumes from
 * the last applied id (the runtime replays or sends a snapshot). A malformed
 * event, an id gap or a throwing callback is reported and answered by a
 * fresh connection without `Last-Event-ID`, i.e. a new snapshot; a snapshot
 * past the limits (`processesMax`, `threadsMax`), only after
 * `oversizeReconnectMs`, as a runtime would send it again. What it gathers
 * of a snapshot in parts is the state they make, never more. Not
 * guaranteed: that a stream is ever re-established; the watcher retries
 * every `reconnectMs` until closed.
 */
export function watchRuntime(options: WatchRuntimeOptions): RuntimeWatcher {
  return new Watch(options);
}

class Watch implements RuntimeWatcher {
  readonly #options: WatchRuntimeOptions;
  readonly #clock: Clock;
  readonly #reconnectMs: number;
  readonly #idleTimeoutMs: number;
  readonly #eventCharsMax: number;
  #lastSeq: number | undefined;
  #source: EventSource | undefined;
  #timer: Timer | undefined;
  #idleTimer: Timer | undefined;
  /** When the open connection last brought a byte (or was opened); monotonic. */
  #lastByteMs = 0;
  #connected = false;
  #closed = false;

  constructor(options: WatchRuntimeOptions) {
    this.#options = options;
    this.#clock = options.clock ?? systemClock;
    this.#reconnectMs = options.reconnectMs ?? WATCHER_DEFAULTS.reconnectMs;
    this.#idleTimeoutMs = options.idleTimeoutMs ?? WATCHER_DEFAULTS.idleTimeoutMs;
    this.#eventCharsMax = options.eventCharsMax ?? WATCHER_DEFAULTS.eventCharsMax;
    // A zero period would re-arm its timer in a tight loop.
    if (!(this.#idleTimeoutMs >= 1)) throw new SwitchyardError('invalid_request', 'idleTimeoutMs must be at least 1');
    this.#lastSeq = parseLastEventId(options.lastEventId);
    this.#connect();
  }

  get lastEventId(): string | undefined {
    return this.#lastSeq === undefined ? undefined : String(this.#lastSeq);
  }

  get connected(): boolean {
    return this.#connected;
  }

  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#timer?.cancel();
    this.#drop();
  }

  #connect(): void {
    this.#timer = undefined;
    if (this.#closed) return;
    // Each connection is a fresh EventSource, so the resume point is ours to send.
    const resumeFrom = this.lastEventId;
    const touch = (): void => {
      if (this.#source === source) this.#lastByteMs = this.#clock.monotonicNow();
    };
    const source = new EventSource(this.#options.url, {
      maxBufferSize: this.#eventCharsMax,
      fetch: async (url, init) => {
        const headers = {
          ...init.headers,
          [WATCH_FEATURES_HEADER]: WATCH_FEATURES.snapshotParts,
          ...(resumeFrom === undefined ? {} : { 'Last-Event-ID': resumeFrom }),
        };
        const response = await this.#options.fetch(url, { ...init, headers });
        touch();
        return countingBytes(response, touch);
      },
    });
    this.#source = source;
    this.#lastByteMs = this.#clock.monotonicNow();
    this.#armIdleCheck(source, this.#idleTimeoutMs);
    source.addEventListener('open', () => {
      if (this.#source === source) this.#connected = true;
    });
    source.addEventListener('error', (event) => {
      if (this.#source !== source) return;
      if (OVERSIZED.test(event.message ?? '')) return this.#failOversized();
      const detail = event.message ?? (event.code === undefined ? 'stream ended' : `HTTP ${event.code}`);
      this.#fail(new SwitchyardError('upstream_unavailable', `watch stream: ${detail}`), false);
    });
    // Per stream: a cut one takes its unfinished parts with it, and the resume starts afresh.
    const { processesMax, threadsMax } = this.#options;
    const parts = new SnapshotAssembler({
      ...(processesMax === undefined ? {} : { processesMax }),
      ...(threadsMax === undefined ? {} : { threadsMax }),
    });
    const on = (name: string, listener: (event: MessageEvent) => void): void =>
      source.addEventListener(name, (event) => {
        if (this.#source !== source) return;
        // The runtime writes a snapshot's parts in one go: anything else among them is a fault.
        if (parts.pending && name !== WATCH_EVENTS.snapshotPart && name !== WATCH_EVENTS.snapshotEnd) {
          return this.#fail(malformed(name, 'within a snapshot sent in parts'), true);
        }
        listener(event);
      });
    on(WATCH_EVENTS.snapshot, (event) => this.#onSnapshot(event));
    on(WATCH_EVENTS.delta, (event) => this.#onDelta(event));
    on(WATCH_EVENTS.snapshotPart, (event) => this.#onSnapshotPart(event, parts));
    on(WATCH_EVENTS.snapshotEnd, (event) => this.#onSnapshotEnd(event, parts));
  }

  #onSnapshot(event: MessageEvent): void {
    const seq = parseLastEventId(event.lastEventId);
    const parsed = parseWith(watchSnapshotSchema, parseJson(event.data));
    if (seq === undefined) return this.#fail(malformed('snapshot', 'missing or bad id'), true);
    if (!parsed.ok) return this.#fail(malformed('snapshot', parsed.error), true);
    this.#deliver(seq, () => this.#options.onSnapshot(parsed.value));
  }

  /** Gathers a part; the state and the resume point stay as they were until the end arrives. */
  #onSnapshotPart(event: MessageEvent, parts: SnapshotAssembler): void {
    const seq = parseLastEventId(event.lastEventId);
    const parsed = parseWith(watchSnapshotPartSchema, parseJson(event.data));
    if (seq === undefined) return this.#fail(malformed('snapshot-part', 'missing or bad id'), true);
    if (!parsed.ok) return this.#fail(malformed('snapshot-part', parsed.error), true);
    const refusal = parts.add(seq, parsed.value);
    if (refusal?.overLimits) return this.#failOverLimits(`snapshot in parts: ${refusal.reason}`);
    if (refusal !== undefined) this.#fail(malformed('snapshot-part', refusal.reason), true);
  }

  #onSnapshotEnd(event: MessageEvent, parts: SnapshotAssembler): void {
    const seq = parseLastEventId(event.lastEventId);
    const parsed = parseWith(watchSnapshotEndSchema, parseJson(event.data));
    if (seq === undefined) return this.#fail(malformed('snapshot-end', 'missing or bad id'), true);
    if (!parsed.ok) return this.#fail(malformed('snapshot-end', parsed.error), true);
    const assembled = parts.finish(seq, parsed.value);
    if (!assembled.ok) return this.#fail(malformed('snapshot-end', assembled.error), true);
    this.#deliver(seq, () => this.#options.onSnapshot(assembled.snapshot));
  }

  #onDelta(event: MessageEvent): void {
    const seq = parseLastEventId(event.lastEventId);
    const parsed = parseWith(watchDeltaSchema, parseJson(event.data));
    if (seq === undefined) return this.#fail(malformed('delta', 'missing or bad id'), true);
    if (!parsed.ok) return this.#fail(malformed('delta', parsed.error), true);
    if (this.#lastSeq === undefined || seq !== this.#lastSeq + 1) {
      return this.#fail(malformed('delta', `id ${seq} does not follow ${this.lastEventId ?? 'a snapshot'}`), true);
    }
    this.#deliver(seq, () => this.#options.onOps(parsed.value.ops));
  }

  /** Records `seq` first, so callbacks see it as `lastEventId`; a throwing callback forgets it again. */
  #deliver(seq: number, callback: () => void): void {
    this.#lastSeq = seq;
    try {
      callback();
    } catch (error) {
      if (error instanceof SwitchyardError && error.code === 'capacity_exhausted') {
        return this.#failOverLimits(error.message);
      }
      this.#fail(new SwitchyardError('internal', 'watch callback failed', { cause: error }), true);
    }
  }

  /**
   * Reports, drops the stream and reconnects after `delayMs`; `resync` forgets the
   * resume point so a snapshot follows.
   */
  #fail(error: SwitchyardError, resync: boolean, delayMs = this.#reconnectMs): void {
    if (resync) this.#lastSeq = undefined;
    this.#drop();
    if (this.#closed) return;
    this.#options.onError?.(error);
    if (!this.#closed && !this.#timer) this.#timer = this.#clock.setTimeout(() => this.#connect(), delayMs);
  }

  /** The resume point stays: the events before the big one were good, and a resume may need no snapshot. */
  #failOversized(): void {
    const message = `watch event over ${this.#eventCharsMax} characters: stream closed`;
    const delayMs = this.#options.oversizeReconnectMs ?? WATCHER_DEFAULTS.oversizeReconnectMs;
    this.#fail(new SwitchyardError('body_too_large', message), false, delayMs);
  }

  /** A runtime past the limits sends the same again at once: asking again soon would only repeat the work. */
  #failOverLimits(message: string): void {
    const delayMs = this.#options.oversizeReconnectMs ?? WATCHER_DEFAULTS.oversizeReconnectMs;
    this.#fail(new SwitchyardError('capacity_exhausted', message), true, delayMs);
  }

  /** Checks, once the stream may have been silent for `idleTimeoutMs`, whether it was. */
  #armIdleCheck(source: EventSource, delayMs: number): void {
    this.#idleTimer = this.#clock.setTimeout(() => {
      if (this.#source !== source) return;
      const silentMs = this.#clock.monotonicNow() - this.#lastByteMs;
      if (silentMs < this.#idleTimeoutMs) return this.#armIdleCheck(source, this.#idleTimeoutMs - silentMs);
      // Nothing else notices a stream that stalls with its connection up: eventsource waits for ever.
      this.#fail(new SwitchyardError('upstream_unavailable', `watch stream: no byte for ${silentMs} ms`), false);
    }, delayMs);
  }

  #drop(): void {
    const source = this.#source;
    this.#idleTimer?.cancel();
    this.#idleTimer = undefined;
    this.#source = undefined;
    this.#connected = false;
    if (!source) return;
    source.close();
    // eventsource arms its reconnect timer after its 'error' listeners return, so a close from one of
    // them (#fail's, or onError's) would leave that timer holding the closed source, and the process, for
    // the stream's `retry:` (3 s, or what the runtime sends). Closing again after the dispatch clears it.
    queueMicrotask(() => source.close());
  }
}

/** How eventsource reports a line or event past its `maxBufferSize` (it closes the source itself). */
const OVERSIZED = /exceeded max buffer size/;

/** `response` with `touch` called for every chunk of its body, so a stall can be told from a slow stream. */
function countingBytes(response: Response, touch: () => void): Response {
  // Only a 200 is read as a stream; other statuses may not carry a body into a new Response.
  if (response.status !== 200 || !response.body) return response;
  const body = response.body.pipeThrough(
    new TransformStream<Uint8Array, Uint8Array>({
      transform(chunk, controller) {
        touch();
        controller.enqueue(chunk);
      },
    }),
  );
  return new Response(body, { status: response.status, statusText: response.statusText, headers: response.headers });
}

function parseJson(text: unknown): unknown {
  if (typeof text !== 'string') return undefined;
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

function malformed(eventName: string, reason: string): SwitchyardError {
  return new SwitchyardError('parse_error', `malformed ${eventName} event: ${reason}`);
}
