import { EventSource } from 'eventsource';
import { systemClock } from '@switchyard/clock';
import type { Clock, Timer } from '@switchyard/clock';
import { SwitchyardError, WATCH_EVENTS, parseWith, watchDeltaSchema, watchSnapshotSchema } from '@switchyard/protocol';
import type { RuntimeOp, WatchSnapshot } from '@switchyard/protocol';
import { parseLastEventId } from './sse.ts';

/** The `fetch` shape the watcher needs: the global one, or one that tunnels. */
export type WatchFetch = (input: string | URL, init: RequestInit) => Promise<Response>;

export interface WatchRuntimeOptions {
  /** The runtime's `/watch` URL. */
  readonly url: string | URL;
  /** Performs every request, e.g. over the tunnel; `globalThis.fetch` works over plain HTTP. */
  readonly fetch: WatchFetch;
  /** A full state: replace what you had. */
  readonly onSnapshot: (snapshot: WatchSnapshot) => void;
  /** Ordered changes to the state of the last snapshot or ops. */
  readonly onOps: (ops: RuntimeOp[]) => void;
  /** Disconnects, malformed events and failures of the callbacks; the watcher reconnects after each. */
  readonly onError?: (error: SwitchyardError) => void;
  /** Delay before a reconnect. Default 1,000 ms. */
  readonly reconnectMs?: number;
  /** Time source of the reconnect delay. Default: the system clock. */
  readonly clock?: Clock;
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

/**
 * Follows a runtime's `/watch` stream with `eventsource`, validating every
 * event with the protocol schemas. Guarantees: callbacks see a gapless
 * sequence — a snapshot, then deltas whose ids follow one another — and after
 * a disconnect the watcher resumes from the last applied id (the runtime
 * replays or sends a snapshot). A malformed event, an id gap or a throwing
 * callback is reported and answered by a fresh connection without
 * `Last-Event-ID`, i.e. a new snapshot. Not guaranteed: that a stream is ever
 * re-established; the watcher retries every `reconnectMs` until closed.
 */
export function watchRuntime(options: WatchRuntimeOptions): RuntimeWatcher {
  return new Watch(options);
}

class Watch implements RuntimeWatcher {
  readonly #options: WatchRuntimeOptions;
  readonly #clock: Clock;
  readonly #reconnectMs: number;
  #lastSeq: number | undefined;
  #source: EventSource | undefined;
  #timer: Timer | undefined;
  #connected = false;
  #closed = false;

  constructor(options: WatchRuntimeOptions) {
    this.#options = options;
    this.#clock = options.clock ?? systemClock;
    this.#reconnectMs = options.reconnectMs ?? 1_000;
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
    const source = new EventSource(this.#options.url, {
      fetch: (url, init) => {
        const headers = resumeFrom === undefined ? init.headers : { ...init.headers, 'Last-Event-ID': resumeFrom };
        return this.#options.fetch(url, { ...init, headers });
      },
    });
    this.#source = source;
    source.addEventListener('open', () => {
      if (this.#source === source) this.#connected = true;
    });
    source.addEventListener('error', (event) => {
      if (this.#source !== source) return;
      const detail = event.message ?? (event.code === undefined ? 'stream ended' : `HTTP ${event.code}`);
      this.#fail(new SwitchyardError('upstream_unavailable', `watch stream: ${detail}`), false);
    });
    source.addEventListener(WATCH_EVENTS.snapshot, (event) => {
      if (this.#source === source) this.#onSnapshot(event);
    });
    source.addEventListener(WATCH_EVENTS.delta, (event) => {
      if (this.#source === source) this.#onDelta(event);
    });
  }

  #onSnapshot(event: MessageEvent): void {
    const seq = parseLastEventId(event.lastEventId);
    const parsed = parseWith(watchSnapshotSchema, parseJson(event.data));
    if (seq === undefined) return this.#fail(malformed('snapshot', 'missing or bad id'), true);
    if (!parsed.ok) return this.#fail(malformed('snapshot', parsed.error), true);
    this.#deliver(seq, () => this.#options.onSnapshot(parsed.value));
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
      this.#fail(new SwitchyardError('internal', 'watch callback failed', { cause: error }), true);
    }
  }

  /** Reports, drops the stream and reconnects; `resync` forgets the resume point so a snapshot follows. */
  #fail(error: SwitchyardError, resync: boolean): void {
    if (resync) this.#lastSeq = undefined;
    this.#drop();
    if (this.#closed) return;
    this.#options.onError?.(error);
    if (!this.#closed && !this.#timer) this.#timer = this.#clock.setTimeout(() => this.#connect(), this.#reconnectMs);
  }

  #drop(): void {
    this.#source?.close();
    this.#source = undefined;
    this.#connected = false;
  }
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
