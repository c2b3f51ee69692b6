import type { ServerResponse } from 'node:http';
import { systemClock } from '@switchyard/clock';
import type { Clock, Timer } from '@switchyard/clock';
import { SwitchyardError, WATCH_FEATURES, WATCH_FEATURES_HEADER, WATCH_LIMITS } from '@switchyard/protocol';
import type { AnyRequest, AnyResponse, RequestHandler } from './http.ts';
import { cutResponse, sendError } from './http.ts';
import { PING, deltaEvent, listsFeature, parseLastEventId, snapshotEvent, snapshotPartEvents } from './sse.ts';
import type { RuntimeBatch, RuntimeStateStore } from './store.ts';

export interface WatchHandlerOptions {
  /** A full snapshot is sent this often on every stream. Default 30,000 ms. */
  readonly snapshotIntervalMs?: number;
  /** A `: ping` comment is sent after this long without traffic. Default 15,000 ms. */
  readonly keepAliveMs?: number;
  /** Time source of both timers. Default: the system clock. */
  readonly clock?: Clock;
  /** Streams open at once; one more gets 503. Default 64. */
  readonly watchersMax?: number;
  /**
   * Bytes a slow client may leave unsent, beyond the last snapshot (which is
   * always sent whole, however big the state) or the replay a resumed stream
   * opened with, before its stream is dropped. A replay larger than this is
   * not sent: the stream opens with a snapshot instead. Default 1 MiB.
   */
  readonly bufferBytesMax?: number;
}

/** Defaults of `createWatchHandler`, with units in the names. */
export const WATCH_DEFAULTS = {
  snapshotIntervalMs: 30_000,
  keepAliveMs: 15_000,
  watchersMax: 64,
  bufferBytesMax: 1024 * 1024,
} as const;

/** The `/watch` handler, plus `close()` to end every open stream. */
export interface WatchHandler extends RequestHandler {
  /** Ends every open stream and answers later requests with 503. Idempotent. */
  close(): void;
  /** Streams open now. */
  readonly watcherCount: number;
}

interface Settings {
  readonly clock: Clock;
  readonly snapshotIntervalMs: number;
  readonly keepAliveMs: number;
  readonly bufferBytesMax: number;
}

/**
 * Serves a runtime's state as SSE (mount it at `GET /watch`; the path is not
 * checked). Works on `node:http` and `node:http2` compat objects alike.
 *
 * Every stream opens with a `snapshot` event, or, when `Last-Event-ID` names a
 * batch still in the store's history, with the missed `delta` events, if they
 * take at most `bufferBytesMax` and hold no more ops than the state has
 * entries (else the snapshot is the cheaper resume); then
 * one `delta` per batch, a `snapshot` every `snapshotIntervalMs` and `: ping`
 * comments when idle. Each event's `id` is the store's `seq`. To a client
 * that lists `WATCH_FEATURES.snapshotParts` in `WATCH_FEATURES_HEADER`, a
 * snapshot of more than `WATCH_LIMITS.snapshotPartEntriesMax` processes and
 * threads goes as `snapshot-part` events and a `snapshot-end`, written in one
 * go, so no delta falls between them; other clients get it whole, as one
 * event, however big. A client whose
 * unsent bytes pass `bufferBytesMax` plus the size of the last snapshot (or of
 * the replay it opened with) is
 * disconnected; it resumes from the last event it got (or a snapshot) when
 * it reconnects. Not guaranteed: delivery of events written before a
 * disconnect.
 */
export function createWatchHandler(store: RuntimeStateStore, options: WatchHandlerOptions = {}): WatchHandler {
  const settings: Settings = {
    clock: options.clock ?? systemClock,
    snapshotIntervalMs: options.snapshotIntervalMs ?? WATCH_DEFAULTS.snapshotIntervalMs,
    keepAliveMs: options.keepAliveMs ?? WATCH_DEFAULTS.keepAliveMs,
    bufferBytesMax: options.bufferBytesMax ?? WATCH_DEFAULTS.bufferBytesMax,
  };
  for (const name of ['snapshotIntervalMs', 'keepAliveMs', 'bufferBytesMax'] as const) {
    // A zero period would re-arm its timer in a tight loop.
    if (!(settings[name] >= 1)) throw new SwitchyardError('invalid_request', `${name} must be at least 1`);
  }
  const watchersMax = options.watchersMax ?? WATCH_DEFAULTS.watchersMax;
  const watchers = new Set<Watcher>();
  let closed = false;

  const handler = (req: AnyRequest, res: AnyResponse): void => {
    if (req.method !== 'GET') {
      sendError(res, new SwitchyardError('method_not_allowed', 'use GET'), { allow: 'GET' });
      return;
    }
    if (closed || store.closed) {
      sendError(res, new SwitchyardError('not_ready', 'watch is closed'));
      return;
    }
    if (watchers.size >= watchersMax) {
      sendError(res, new SwitchyardError('capacity_exhausted', `at most ${watchersMax} watchers`), {
        'retry-after': '1',
      });
      return;
    }
    const snapshotParts = listsFeature(req.headers[WATCH_FEATURES_HEADER], WATCH_FEATURES.snapshotParts);
    const watcher = new Watcher(store, res, settings, snapshotParts, () => watchers.delete(watcher));
    watchers.add(watcher);
    try {
      watcher.start(parseLastEventId(req.headers['last-event-id']));
    } catch (error) {
      // E.g. a closed store refuses subscribers: end this stream, never the server.
      watcher.fail(error);
    }
  };
  // defineProperty, not Object.assign: assign would copy the getter's value once.
  return Object.defineProperties(handler, {
    close: {
      value: (): void => {
        if (closed) return;
        closed = true;
        for (const watcher of [...watchers]) watcher.end();
      },
    },
    watcherCount: { get: (): number => watchers.size },
  }) as WatchHandler;
}

/** One open stream. */
class Watcher {
  readonly #store: RuntimeStateStore;
  readonly #res: AnyResponse;
  readonly #settings: Settings;
  readonly #onDone: () => void;
  /** The client reads snapshots in parts. */
  readonly #snapshotParts: boolean;
  #unsubscribe: (() => void) | undefined;
  #snapshotTimer: Timer | undefined;
  #pingTimer: Timer | undefined;
  /** When the stream was last written to; monotonic. */
  #lastWriteMs = 0;
  /** Unsent bytes allowed: `bufferBytesMax` beyond the last snapshot. */
  #unsentBytesMax: number;
  #done = false;

  constructor(
    store: RuntimeStateStore,
    res: AnyResponse,
    settings: Settings,
    snapshotParts: boolean,
    onDone: () => void,
  ) {
    this.#store = store;
    this.#snapshotParts = snapshotParts;
    this.#res = res;
    this.#settings = settings;
    this.#onDone = onDone;
    this.#unsentBytesMax = settings.bufferBytesMax;
  }

  start(lastSeq: number | undefined): void {
    this.#res.on('close', () => this.#cleanup());
    (this.#res as ServerResponse).writeHead(200, {
      'content-type': 'text/event-stream',
      'cache-control': 'no-store',
      'x-accel-buffering': 'no',
    });
    // Sends the headers now even when nothing else is due, so the client sees the stream open.
    this.#write(PING);
    const replay = lastSeq === undefined ? undefined : this.#replayOf(lastSeq);
    if (replay === undefined) this.#sendSnapshot();
    else {
      // Sent whole, as a snapshot is: a resume cut as it opens would be retried, and cut again.
      this.#unsentBytesMax = this.#settings.bufferBytesMax + Buffer.byteLength(replay);
      this.#write(replay);
    }
    // Replay and subscription happen in one tick, so no batch falls between them.
    if (!this.#done) this.#unsubscribe = this.#store.subscribe((batch) => this.#sendBatch(batch));
    this.#scheduleSnapshot();
    this.#schedulePing(this.#settings.keepAliveMs);
  }

  /** Answers with the error when nothing was sent yet, else cuts the stream. */
  fail(error: unknown): void {
    if (this.#done) return;
    this.#cleanup();
    sendError(this.#res, error);
  }

  /** Ends the stream politely (server shutdown). */
  end(): void {
    if (this.#done) return;
    this.#res.end();
    this.#cleanup();
  }

  /**
   * The missed deltas after `lastSeq` as one text, or undefined when a snapshot
   * serves better: they are no longer in the history, pass `bufferBytesMax`, or
   * carry more ops than the state has entries (a snapshot is then smaller).
   */
  #replayOf(lastSeq: number): string | undefined {
    const missed = this.#store.batchesSince(lastSeq);
    if (missed === undefined) return undefined;
    const entries = this.#store.entryCount;
    const texts: string[] = [];
    let bytes = 0;
    let ops = 0;
    for (const batch of missed) {
      const text = deltaEvent(batch.seq, batch.ops);
      bytes += Buffer.byteLength(text);
      ops += batch.ops.length;
      if (bytes > this.#settings.bufferBytesMax || ops > entries) return undefined;
      texts.push(text);
    }
    return texts.join('');
  }

  #sendBatch(batch: RuntimeBatch): void {
    this.#write(deltaEvent(batch.seq, batch.ops));
  }

  #sendSnapshot(): void {
    // snapshot() flushes first: a pending batch reaches this stream before the snapshot that includes
    // it, and seq, read after it, is the snapshot's.
    const snapshot = this.#store.snapshot();
    const seq = this.#store.seq;
    const partEntriesMax = WATCH_LIMITS.snapshotPartEntriesMax;
    const inParts = this.#snapshotParts && this.#store.entryCount > partEntriesMax;
    const texts = inParts ? snapshotPartEvents(seq, snapshot, partEntriesMax) : [snapshotEvent(seq, snapshot)];
    let bytes = 0;
    for (const text of texts) {
      if (this.#done) return;
      // Counted from the snapshot's end (so far): a state bigger than bufferBytesMax would otherwise
      // have its stream cut at every opening, and the runtime would never be synced.
      bytes += Buffer.byteLength(text);
      this.#unsentBytesMax = this.#settings.bufferBytesMax + bytes;
      this.#write(text);
    }
  }

  #write(text: string): void {
    if (this.#done) return;
    (this.#res as ServerResponse).write(text);
    this.#lastWriteMs = this.#settings.clock.monotonicNow();
    if (this.#res.writableLength > this.#unsentBytesMax) {
      // Buffering without limit would let one stuck client exhaust memory.
      cutResponse(this.#res, 'watch client too slow');
      this.#cleanup();
    }
  }

  #scheduleSnapshot(): void {
    if (this.#done) return;
    this.#snapshotTimer = this.#settings.clock.setTimeout(() => {
      this.#sendSnapshot();
      this.#scheduleSnapshot();
    }, this.#settings.snapshotIntervalMs);
  }

  #schedulePing(delayMs: number): void {
    if (this.#done) return;
    this.#pingTimer = this.#settings.clock.setTimeout(() => {
      const { clock, keepAliveMs } = this.#settings;
      if (clock.monotonicNow() - this.#lastWriteMs >= keepAliveMs) this.#write(PING);
      this.#schedulePing(Math.max(1, keepAliveMs - (clock.monotonicNow() - this.#lastWriteMs)));
    }, delayMs);
  }

  #cleanup(): void {
    if (this.#done) return;
    this.#done = true;
    this.#unsubscribe?.();
    this.#snapshotTimer?.cancel();
    this.#pingTimer?.cancel();
    this.#onDone();
  }
}
