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
   * opened with, before its stream is dropped; also the bytes of batches held
   * behind a snapshot's parts. A replay larger than this is not sent: the
   * stream opens with a snapshot instead. Default 1 MiB.
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
 * threads goes as `snapshot-part` events and a `snapshot-end`, one part per
 * event-loop turn and each once the response took the one before, so the
 * runtime goes on serving while a big state goes out and the response buffers
 * about one part; batches flushed meanwhile wait and follow the `snapshot-end`
 * in order, and a periodic snapshot due meanwhile is skipped. Other clients
 * get a snapshot whole, as one event written at once, however big. A client
 * whose unsent bytes pass `bufferBytesMax` plus the size of the last snapshot
 * (or of the replay it opened with), or whose batches held behind a snapshot's
 * parts pass `bufferBytesMax`, is disconnected; it resumes from the last
 * event it got (or a snapshot) when it reconnects. Not guaranteed: delivery
 * of events written before a disconnect.
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
  /** Delta events that wait for the end of the snapshot whose parts are being written; undefined between. */
  #held: string[] | undefined;
  /** Bytes of `#held`: they count against `bufferBytesMax`, as if written. */
  #heldBytes = 0;
  /** Ends the wait for a 'drain' (see `#drained`). */
  #wake: (() => void) | undefined;
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
    const text = deltaEvent(batch.seq, batch.ops);
    if (this.#held === undefined) return void this.#write(text);
    // Between a snapshot's parts no event may come: the batch waits for its end, as the rest of the stream.
    this.#heldBytes += Buffer.byteLength(text);
    this.#held.push(text);
    if (this.#heldBytes > this.#settings.bufferBytesMax) this.#cut();
  }

  #sendSnapshot(): void {
    // A snapshot still on its way is as fresh as a stream needs: a second one would only wait behind it.
    if (this.#held !== undefined) return;
    // snapshot() flushes first: a pending batch reaches this stream before the snapshot that includes
    // it, and seq, read after it, is the snapshot's.
    const snapshot = this.#store.snapshot();
    const seq = this.#store.seq;
    const partEntriesMax = WATCH_LIMITS.snapshotPartEntriesMax;
    if (!this.#snapshotParts || this.#store.entryCount <= partEntriesMax) {
      const text = snapshotEvent(seq, snapshot);
      this.#allowUnsent(Buffer.byteLength(text));
      this.#write(text);
      return;
    }
    this.#held = [];
    this.#heldBytes = 0;
    this.#writeParts(snapshotPartEvents(seq, snapshot, partEntriesMax)).catch((error: unknown) => this.fail(error));
  }

  /**
   * Writes a snapshot's parts one per event-loop turn, each once the response took the one before
   * (its 'drain'), so that the runtime goes on serving while a big state goes out and the response
   * buffers about one part; then the batches held meanwhile, in order. Stops when the stream ends.
   */
  async #writeParts(texts: Generator<string>): Promise<void> {
    let bytes = 0;
    for (const text of texts) {
      if (this.#done) return;
      bytes += Buffer.byteLength(text);
      this.#allowUnsent(bytes);
      const ok = this.#write(text);
      if (this.#done) return;
      await (ok ? new Promise((resolve) => setImmediate(resolve)) : this.#drained());
    }
    if (this.#done) return;
    const held = this.#held ?? [];
    this.#held = undefined;
    for (const text of held) this.#write(text);
  }

  /**
   * Unsent bytes allowed from now on: `bufferBytesMax` beyond the snapshot's `bytes` so far. A state
   * bigger than bufferBytesMax would otherwise have its stream cut at every opening, and the runtime
   * would never be synced.
   */
  #allowUnsent(bytes: number): void {
    this.#unsentBytesMax = this.#settings.bufferBytesMax + bytes;
  }

  /** Settles once the response takes more writes ('drain'), or the stream is done. */
  #drained(): Promise<void> {
    return new Promise((resolve) => {
      const wake = (): void => {
        this.#res.off('drain', wake);
        this.#wake = undefined;
        resolve();
      };
      this.#wake = wake;
      this.#res.on('drain', wake);
    });
  }

  /** Writes `text`; returns false when the response wants a 'drain' before more (or the stream is done). */
  #write(text: string): boolean {
    if (this.#done) return false;
    const ok = (this.#res as ServerResponse).write(text);
    this.#lastWriteMs = this.#settings.clock.monotonicNow();
    if (this.#res.writableLength > this.#unsentBytesMax) {
      this.#cut();
      return false;
    }
    return ok;
  }

  /** Buffering without limit would let one stuck client exhaust memory. */
  #cut(): void {
    cutResponse(this.#res, 'watch client too slow');
    this.#cleanup();
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
    this.#held = undefined;
    this.#wake?.();
    this.#onDone();
  }
}
