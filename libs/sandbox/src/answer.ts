import { toWebRequest } from '@modelcontextprotocol/node';
import type { HostRequest, HostResponse } from './types.ts';
import { errorResponse, responseForError } from './wire.ts';

/** A response, and what its request holds until the response is over. */
export interface Answer {
  readonly response: Response;
  /**
   * Frees what the request holds (a legacy session's place, a sandbox).
   * Its writer calls it once, when the body has been written or the client
   * went away.
   */
  readonly release: () => void;
}

/** An answer that holds nothing. */
export function settled(response: Response): Answer {
  return { response, release: () => {} };
}

const EVENT_STREAM = 'text/event-stream';

export interface AnswerWriterOptions {
  /** Largest request body, bytes; a longer one is a 413. */
  readonly maxRequestBodySize: number;
  /** A request that could not be turned into an answer (a 500 is sent). */
  readonly onerror: (error: Error) => void;
  /**
   * How long a response may wait for its client to take any of it while
   * more is ready; then its body is cancelled and the response ended (see
   * `copy`).
   */
  readonly writeStallMs: number;
  /** Counts the event-stream answers being written (`open` rises as one starts, falls as it ends). */
  readonly eventStreams?: { open: number };
}

/**
 * Serves `handle` on node `http` or `http2` compat objects, as the SDK's
 * `toNodeHandler` serves a fetch handler (same request conversion, 413 and
 * 500 answers), and releases each answer when it is over. Releasing here,
 * from the copy loop, costs nothing per request; wrapping every body in a
 * stream of its own to see its end cost the runtime 55–110 µs of CPU per
 * tool call.
 *
 * A client going away cancels the body at once: otherwise the loop would
 * notice only at the next chunk, and until the SDK transport's stream is
 * cancelled it keeps the session's one GET stream (a new GET is 409) and a
 * POST stream's place (a `Last-Event-ID` resume is 409); a silent GET
 * stream would wait for the SDK's 15 s keep-alive.
 */
export function answerWriter(
  handle: (request: Request) => Promise<Answer>,
  options: AnswerWriterOptions,
): (req: HostRequest, res: HostResponse) => Promise<void> {
  return async (req, res) => {
    let finished = false;
    /** options.eventStreams, once this answer is counted there. */
    let counted: { open: number } | undefined;
    const gone = new AbortController();
    res.on('close', () => {
      if (!finished) gone.abort();
    });
    if (res.destroyed === true) gone.abort();
    let answer: Answer;
    try {
      const request = await toWebRequest(req, undefined, {
        signal: gone.signal,
        maxRequestBodySize: options.maxRequestBodySize,
      });
      answer = await handle(request);
    } catch (error) {
      answer = settled(failure(error, options.onerror));
    }
    try {
      const headers: Record<string, string> = {};
      for (const [name, value] of answer.response.headers) headers[name] = value;
      res.writeHead(answer.response.status, headers);
      if (answer.response.body) {
        if (headers['content-type']?.startsWith(EVENT_STREAM)) counted = options.eventStreams;
        if (counted) counted.open++;
        await copy(answer.response.body, res, gone.signal, options.writeStallMs);
      }
    } finally {
      finished = true;
      if (counted) counted.open--;
      res.end();
      answer.release();
    }
  };
}

/**
 * Writes `body` into `res`, waiting for 'drain' when it is full; stops and
 * cancels the body once `gone` aborts, or once `res` stayed full for
 * `stallMs`. The SDK's transport queues a stream's events in its body
 * without bound, whether or not they are read, so a client that stops
 * reading an event stream (a process stopped, not gone) would have the
 * runtime hold every event sent to it from then on. Ending the response
 * instead bounds that: a client that reads again gets what was written,
 * then the end of the stream, and resumes it (a legacy session keeps its
 * last 1,000 events, up to 8 MiB, for that) or opens another.
 */
async function copy(
  body: ReadableStream<Uint8Array>,
  res: HostResponse,
  gone: AbortSignal,
  stallMs: number,
): Promise<void> {
  const reader = body.getReader();
  let drained: (() => void) | undefined;
  const wake = (): void => {
    drained?.();
    drained = undefined;
  };
  const cancel = (): void => {
    wake();
    reader.cancel().catch(() => {});
  };
  if (gone.aborted) return cancel();
  gone.addEventListener('abort', cancel, { once: true });
  res.on('drain', wake);
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done || gone.aborted) return;
      if (res.write(value) === false && !gone.aborted) {
        const stalled = setTimeout(cancel, stallMs);
        await new Promise<void>((resolve) => (drained = resolve));
        clearTimeout(stalled);
      }
    }
  } catch {
    // The stream failed or was cancelled: the response ends here.
  } finally {
    gone.removeEventListener('abort', cancel);
  }
}

/** The answer to a request that never reached the handler's own error handling. */
function failure(error: unknown, onerror: (error: Error) => void): Response {
  // toWebRequest's error for a body over the limit (its class is not exported).
  if ((error as { name?: unknown } | null)?.name === 'RequestBodyTooLargeError') {
    const response = errorResponse('body_too_large', (error as Error).message);
    // An HTTP/1.1 server then ends the connection instead of idling one whose request was left partly unread.
    response.headers.set('connection', 'close');
    return response;
  }
  try {
    onerror(error instanceof Error ? error : new Error(String(error)));
  } catch {
    // Reporting must never change the answer.
  }
  return responseForError(error);
}
