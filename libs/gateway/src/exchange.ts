import type { IncomingHttpHeaders, ServerResponse } from 'node:http';
import type { Dispatcher } from 'undici';
import type { Dispatch } from './http2-streams.ts';
import { unlist } from './standing-streams.ts';
import type { StandingStream, StandingStreams } from './standing-streams.ts';
import { downstreamHeaders, isEventStream } from './upstream.ts';

/** One request to a runtime, as `exchange` sends it. */
export interface UpstreamCall {
  readonly url: string;
  readonly method: 'GET' | 'POST' | 'DELETE';
  readonly headers: Record<string, string>;
  readonly body?: Buffer;
  readonly signal: AbortSignal;
  readonly idleTimeoutMs: number;
  /** Set when the caller listens for the client response's close already (see CloseWatch). */
  readonly closeWatch?: CloseWatch;
}

/**
 * How a relay hears that its client's response closed from a caller that
 * listens for that already: the caller's listener calls the relay's
 * `clientClosed()`, after its own work. Without one the relay listens
 * itself, which on every open stream costs a closure and turns the
 * response's close listeners into an array: about 200 bytes a stream.
 */
export interface CloseWatch {
  /** The relay of the response now, set and cleared by it. */
  relay: { clientClosed(): void; endEventStream(): boolean } | undefined;
}

/**
 * How a relay ended: the client got the whole response, the client went away
 * first (the upstream request is then cancelled), or the upstream broke (the
 * client's response is then cut).
 */
export type RelayOutcome = 'complete' | 'cancelled' | 'broken';

/** Told how a relay ended, and whether it relayed an event stream. */
export type RelayEnd = (outcome: RelayOutcome, eventStream: boolean) => void;

/**
 * An upstream response whose head has arrived and whose body waits, paused,
 * for the caller to relay it or throw it away (exactly one of the two).
 */
export interface UpstreamResponse {
  readonly statusCode: number;
  /** The response headers until `relay` has copied them (then empty). */
  readonly headers: IncomingHttpHeaders;
  /**
   * Sends the status and the headers a client may see, then streams the body
   * into `res` (the response the exchange was made for), and calls `onEnd`
   * once, when the relay is over. Non-event-stream bodies are cut after
   * `idleTimeoutMs` without a byte. A callback, not a promise: an open event
   * stream then holds no promise and reaction for as long as it lasts. An
   * event stream is listed in `standing`, when given, while it is relayed.
   */
  relay(res: ServerResponse, idleTimeoutMs: number, onEnd: RelayEnd, standing?: StandingStreams): void;
  /**
   * Reads and drops the body (at most DISCARD_BYTES_MAX, and for at most the
   * call's idleTimeoutMs, else the connection is cut); resolves with its first
   * BODY_HEAD_BYTES, enough for an error's words.
   */
  discard(): Promise<Buffer>;
}

const DISCARD_BYTES_MAX = 64 * 1024;
const BODY_HEAD_BYTES = 1024;
/** What `headers` holds once relay has copied them: one shared empty object, not one per open stream. */
const COPIED: IncomingHttpHeaders = Object.freeze({});
const CLIENT_GONE = 'client disconnected';
const GATEWAY_CLOSING = 'gateway closing';

/** Failures of the upstream's making before its response head: see isUpstreamFailure. */
const upstreamFailures = new WeakSet<object>();

/**
 * True for an error `exchange` rejected with because of the upstream (it
 * reset or closed the connection, or sent no head in time), as opposed to
 * the client leaving or a fault of the gateway's own.
 */
export function isUpstreamFailure(error: unknown): boolean {
  return typeof error === 'object' && error !== null && upstreamFailures.has(error);
}

/** Marks `error` as the upstream's (see isUpstreamFailure): for failures found after the head, e.g. in a proxy's 502. */
export function upstreamFailure(error: Error): Error {
  upstreamFailures.add(error);
  return error;
}

/**
 * An undici dispatch handler that writes the response straight into the
 * client's `ServerResponse`. It replaces `request()` + `pipe()`: no body
 * stream, no AbortSignal listener, no promise per step, so less work on
 * every request and fewer objects held by every open event stream. The
 * client's response closing early is the cancellation, at any stage.
 */
class Exchange implements Dispatcher.DispatchHandler, UpstreamResponse, StandingStream {
  statusCode = 0;
  headers: IncomingHttpHeaders = {};
  /** StandingStreams' links, while a standing event stream is relayed. */
  older: StandingStream | undefined = undefined;
  newer: StandingStream | undefined = undefined;
  readonly #res: ServerResponse;
  #controller: Dispatcher.DispatchController | undefined;
  #head: { resolve: (r: UpstreamResponse) => void; reject: (e: unknown) => void } | undefined;
  #mode: 'head' | 'paused' | 'relay' | 'discard' | 'done' = 'head';
  #cancelled: Error | undefined;
  #discarded = 0;
  /** The first bytes of a discarded body; only a discard creates it. */
  #bodyHead: Buffer[] | undefined;
  #idle: NodeJS.Timeout | undefined;
  #corked = false;
  /** Something of the body, or its end, has been written to the client (the head with it). */
  #wrote = false;
  #settle: RelayEnd | undefined;
  #eventStream = false;
  readonly #idleTimeoutMs: number;
  readonly #watch: CloseWatch | undefined;
  /** Its own listener for the response's close, without a CloseWatch. */
  readonly #onClose: (() => void) | undefined;

  constructor(
    res: ServerResponse,
    head: { resolve: (r: UpstreamResponse) => void; reject: (e: unknown) => void },
    idleTimeoutMs: number,
    watch: CloseWatch | undefined,
  ) {
    this.#res = res;
    this.#head = head;
    this.#idleTimeoutMs = idleTimeoutMs;
    this.#watch = watch;
    if (watch) {
      watch.relay = this;
      return;
    }
    // `on`, not `once`: a response closes once, and `once` wraps the
    // listener in one more closure.
    this.#onClose = () => this.clientClosed();
    res.on('close', this.#onClose);
  }

  /** Detaches from the client response when this exchange never got a head (the caller may try again). */
  #detach(): void {
    if (this.#onClose) this.#res.off('close', this.#onClose);
    else if (this.#watch?.relay === this) this.#watch.relay = undefined;
  }

  /** The client's response closed: see CloseWatch. */
  clientClosed(): void {
    const res = this.#res;
    if (res.writableFinished) return this.#finish('complete');
    const reason = new Error(CLIENT_GONE);
    this.#cancelled = reason;
    this.#controller?.abort(reason);
    this.#rejectHead(reason);
    this.#finish('cancelled');
  }

  #rejectHead(error: unknown): void {
    const head = this.#head;
    if (!head) return;
    this.#head = undefined;
    this.#mode = 'done';
    this.#detach();
    head.reject(error);
  }

  onRequestStart(controller: Dispatcher.DispatchController): void {
    this.#controller = controller;
    // The client left while the request waited for a connection: never send it.
    if (this.#cancelled) controller.abort(this.#cancelled);
  }

  onResponseStart(controller: Dispatcher.DispatchController, statusCode: number, headers: IncomingHttpHeaders): void {
    if (statusCode < 200 || !this.#head) return;
    this.statusCode = statusCode;
    this.headers = headers;
    // The raw header buffers would otherwise live as long as the stream.
    controller.rawHeaders = null;
    // Nothing more is read until the caller decides what becomes of the body.
    controller.pause();
    this.#mode = 'paused';
    const head = this.#head;
    this.#head = undefined;
    head.resolve(this);
  }

  onResponseData(controller: Dispatcher.DispatchController, chunk: Buffer): void {
    if (this.#mode === 'discard') {
      if (this.#discarded < BODY_HEAD_BYTES) this.#bodyHead?.push(chunk.subarray(0, BODY_HEAD_BYTES - this.#discarded));
      this.#discarded += chunk.length;
      if (this.#discarded > DISCARD_BYTES_MAX) controller.abort(new Error('upstream body too large to discard'));
      return;
    }
    if (this.#mode !== 'relay') return;
    const res = this.#res;
    this.#idle?.refresh();
    this.#cork(res);
    this.#wrote = true;
    if (!res.write(chunk)) {
      controller.pause();
      res.once('drain', () => controller.resume());
    }
  }

  onResponseEnd(): void {
    if (this.#head) return this.#rejectHead(upstreamFailure(new Error('upstream ended without a response')));
    const mode = this.#mode;
    this.#mode = 'done';
    // 'complete' then comes with the response's 'close' (after 'finish').
    if (mode === 'relay') {
      this.#wrote = true;
      this.#res.end();
    } else this.#finish('complete');
  }

  onResponseError(_controller: Dispatcher.DispatchController | undefined, error: Error): void {
    if (this.#head) return this.#rejectHead(upstreamFailure(error));
    const mode = this.#mode;
    // Ended from the gateway's side (endStream): the client's response ended whole.
    if (mode === 'done') return this.#finish('complete');
    this.#mode = 'done';
    // Headers may be out already: the client can only be told by a cut stream.
    if (mode === 'relay' && !this.#res.destroyed) this.#res.destroy();
    // The client leaving aborts the request, and undici reports that abort here at once: not the upstream's break.
    this.#finish(mode === 'discard' ? 'complete' : this.#cancelled ? 'cancelled' : 'broken');
  }

  relay(res: ServerResponse, idleTimeoutMs: number, onEnd: RelayEnd, standing?: StandingStreams): void {
    const sse = isEventStream(this.headers);
    if (this.#mode !== 'paused') {
      // The upstream broke, or the client left, while the caller was busy.
      if (!res.destroyed) res.destroy();
      return onEnd(this.#cancelled ? 'cancelled' : 'broken', sse);
    }
    this.#settle = onEnd;
    this.#eventStream = sse;
    this.#mode = 'relay';
    // Head stored now, sent with the first write (or flushHeaders below).
    res.writeHead(this.statusCode, downstreamHeaders(this.headers, sse, res.getHeader('vary')));
    // Copied: an open event stream need not hold them.
    this.headers = COPIED;
    // Whatever is buffered already is parsed and written now, in one write.
    this.#cork(res);
    this.#controller?.resume();
    // One timer per response still arriving, pushed back by each chunk. Started
    // once the buffered part is written: most JSON answers came whole with
    // their head and have ended by now, and need none.
    if (!sse && this.#mode === 'relay') {
      const timer = setTimeout(() => this.#controller?.abort(new Error('upstream idle timeout')), idleTimeoutMs);
      timer.unref();
      this.#idle = timer;
    }
    // A silent stream (a GET stream, a long tool call) still gets its
    // headers once this turn of the loop is over; flushing at once would
    // cost a write of its own when the first event is about to follow.
    if (sse && !this.#wrote) {
      setImmediate(() => {
        if (!this.#wrote && !res.destroyed) res.flushHeaders();
      });
    }
    // Not once the upstream has ended or broken while its buffered part was written: #finish unlists.
    if (sse && this.#mode === 'relay') standing?.add(this);
  }

  /**
   * Ends the event stream from the gateway's side: the client's response
   * ends cleanly (its client may open the stream again, with
   * `Last-Event-ID`), the upstream request is cancelled, and the relay
   * counts as complete. Does nothing once the relay is over.
   */
  endStream(): void {
    if (this.#mode !== 'relay') return;
    this.#mode = 'done';
    // The head, if not out yet, leaves with the end.
    this.#wrote = true;
    this.#res.end();
    this.#controller?.abort(new Error(GATEWAY_CLOSING));
  }

  /**
   * Ends the response as endStream does if it is an event stream being
   * relayed, and says whether it did: an event stream ends whole at any
   * point (a client drops an event it has only part of), any other body
   * would look whole cut short.
   */
  endEventStream(): boolean {
    if (!this.#eventStream || this.#mode !== 'relay') return false;
    this.endStream();
    return true;
  }

  discard(): Promise<Buffer> {
    return new Promise((resolve) => {
      this.#detach();
      const bodyHead: Buffer[] = (this.#bodyHead = []);
      this.#settle = () => resolve(Buffer.concat(bodyHead));
      if (this.#mode !== 'paused') return this.#finish('complete');
      this.#mode = 'discard';
      // Nothing else bounds it (the client's leaving no longer cancels, bodies have no
      // undici timeout): an upstream that sends a failure's head and stalls is not waited for.
      const timer = setTimeout(() => this.#controller?.abort(new Error('upstream idle timeout')), this.#idleTimeoutMs);
      timer.unref();
      this.#idle = timer;
      this.#controller?.resume();
    });
  }

  /**
   * Holds the client socket corked until the current burst of parsing is
   * over, so what arrived together (headers, event, terminating chunk)
   * leaves in one write. The socket, not `res`: a corked response buffers
   * chunks apart and its end() would then write the terminating chunk first.
   */
  #cork(res: ServerResponse): void {
    const socket = res.socket;
    if (this.#corked || !socket) return;
    this.#corked = true;
    socket.cork();
    process.nextTick(() => {
      this.#corked = false;
      if (!res.writableEnded && !socket.destroyed && socket.writableCorked > 0) socket.uncork();
    });
  }

  #finish(outcome: RelayOutcome): void {
    unlist(this);
    clearTimeout(this.#idle);
    this.#idle = undefined;
    const settle = this.#settle;
    this.#settle = undefined;
    settle?.(outcome, this.#eventStream);
  }
}

/**
 * `http://host:port/path` split into origin and path without a URL parse per
 * request; route URLs were validated when the placement was accepted.
 */
function splitUrl(url: string): { origin: string; path: string } {
  const slash = url.indexOf('/', url.indexOf('//') + 2);
  return slash === -1 ? { origin: url, path: '/' } : { origin: url.slice(0, slash), path: url.slice(slash) };
}

/**
 * Sends one request and resolves once the response head is in, its body
 * paused until `relay` or `discard`; rejects with undici's error (see
 * isConnectFailure), or when `res` closes first (the client went away, which
 * also cancels the upstream request at whatever stage it is).
 */
export function exchange(dispatcher: Dispatch, call: UpstreamCall, res: ServerResponse): Promise<UpstreamResponse> {
  return new Promise((resolve, reject) => {
    if (call.signal.aborted) return reject(call.signal.reason);
    const { origin, path } = splitUrl(call.url);
    const handler = new Exchange(res, { resolve, reject }, call.idleTimeoutMs, call.closeWatch);
    try {
      dispatcher.dispatch(
        {
          origin,
          path,
          method: call.method,
          headers: call.headers,
          // Undefined for none, which undici takes as none.
          body: call.body,
          headersTimeout: call.idleTimeoutMs,
          // Event streams may be silent for as long as a tool runs; the idle
          // timers of relay and discard cover every other body.
          bodyTimeout: 0,
        },
        handler,
      );
    } catch (error) {
      handler.onResponseError(undefined, error as Error);
    }
  });
}
