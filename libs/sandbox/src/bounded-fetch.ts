/** What was cut: a whole body (JSON, or anything but SSE) or one event of an SSE stream. */
export type AnswerCutKind = 'json' | 'event';

const LF = 10;
const CR = 13;
/** Bytes at the start of an event searched for its `id:` line (servers write it first). */
const EVENT_ID_SEARCH_BYTES = 1024;
/** Statuses whose responses cannot carry a body (the Response constructor refuses one). */
const NULL_BODY_STATUSES = new Set([101, 103, 204, 205, 304]);

/** `10 MiB`, or the bytes when not whole MiB. */
export function describeBytes(bytes: number): string {
  const mib = bytes / (1024 * 1024);
  return Number.isInteger(mib) ? `${mib} MiB` : `${bytes} bytes`;
}

/**
 * Wraps the fetch of an MCP client transport so that no answer holds more
 * than `bytesMax` bytes in memory: the SDK transport reads a JSON answer, and
 * each SSE event, whole and without a limit. A body that is not SSE is
 * passed through as it comes and errors once it is past `bytesMax` (at once
 * when its `Content-Length` says so), which fails the request it answers.
 * An SSE stream is passed on an event at a time; an event past `bytesMax`
 * ends the stream: the requests its POST carried are answered with a
 * JSON-RPC error (`-32603`), and an event with the oversized event's `id`
 * is passed first, so a GET stream the transport resumes (Last-Event-ID)
 * resumes after it. `onCut` is told of each cut.
 *
 * Not guaranteed: an event whose `id` is not among its first
 * EVENT_ID_SEARCH_BYTES is resumed at, not after.
 */
export function boundedFetch(
  inner: typeof fetch,
  bytesMax: number,
  onCut: (kind: AnswerCutKind) => void,
): typeof fetch {
  const tooLarge = `the upstream's answer is larger than ${describeBytes(bytesMax)}: cut`;
  return async (input, init) => {
    const response = await inner(input, init);
    if (response.body === null || NULL_BODY_STATUSES.has(response.status)) return response;
    const sse = response.headers.get('content-type')?.split(';', 1)[0]?.trim().toLowerCase() === 'text/event-stream';
    const bound = sse
      ? eventsBound(bytesMax, () => {
          onCut('event');
          return errorsFor(requestIds(init?.body), tooLarge);
        })
      : bodyBound(bytesMax, Number(response.headers.get('content-length') ?? 0), () => {
          onCut('json');
          return new Error(tooLarge);
        });
    const { status, statusText, headers } = response;
    return new Response(response.body.pipeThrough(bound), { status, statusText, headers });
  };
}

/** Passes a body through until it is past `bytesMax`, then errors with `cut()`. */
function bodyBound(bytesMax: number, declaredBytes: number, cut: () => Error): TransformStream<Uint8Array, Uint8Array> {
  let bytes = 0;
  return new TransformStream({
    start(controller) {
      if (declaredBytes > bytesMax) controller.error(cut());
    },
    transform(chunk, controller) {
      bytes += chunk.length;
      if (bytes > bytesMax) return controller.error(cut());
      controller.enqueue(chunk);
    },
  });
}

/**
 * Passes an SSE stream on whole events (a blank line ends one: LF, CR or
 * CRLF), holding the event in progress; one past `bytesMax` is dropped and
 * the stream ends with its id (see boundedFetch) and the events `cut()`
 * gives. The parser behind holds an event until it is whole anyway, so
 * holding it here delays nothing.
 */
function eventsBound(bytesMax: number, cut: () => string): TransformStream<Uint8Array, Uint8Array> {
  let held: Uint8Array[] = [];
  let heldBytes = 0;
  let lineEmpty = true;
  let afterCr = false;
  const release = (controller: TransformStreamDefaultController<Uint8Array>): void => {
    for (const piece of held) controller.enqueue(piece);
    held = [];
    heldBytes = 0;
  };
  const overflow = (controller: TransformStreamDefaultController<Uint8Array>, rest: Uint8Array): void => {
    const id = eventId([...held, rest]);
    held = [];
    const skipped = id === undefined ? '' : `id: ${id}\ndata:\n\n`;
    // The parser behind has had whole events only: it is between two.
    controller.enqueue(new TextEncoder().encode(`${skipped}${cut()}`));
    controller.terminate();
  };
  return new TransformStream({
    transform(chunk, controller) {
      let start = 0;
      let lf = -2;
      let cr = -2;
      for (let i = 0; i < chunk.length;) {
        if (lf !== -1 && lf < i) lf = chunk.indexOf(LF, i);
        if (cr !== -1 && cr < i) cr = chunk.indexOf(CR, i);
        const end = lf === -1 ? cr : cr === -1 ? lf : Math.min(lf, cr);
        if (end === -1) {
          // What is left of the chunk starts (or continues) a line.
          lineEmpty = false;
          afterCr = false;
          break;
        }
        const crlf = afterCr && end === i && chunk[end] === LF;
        const content = end > i;
        afterCr = chunk[end] === CR;
        i = end + 1;
        if (crlf) continue;
        if (content || !lineEmpty) {
          lineEmpty = true;
          continue;
        }
        // A blank line: the event held and this chunk up to here are whole.
        if (heldBytes + (i - start) > bytesMax) return overflow(controller, chunk.subarray(start, i));
        held.push(chunk.subarray(start, i));
        release(controller);
        start = i;
      }
      if (start === chunk.length) return;
      heldBytes += chunk.length - start;
      if (heldBytes > bytesMax) return overflow(controller, chunk.subarray(start));
      held.push(chunk.subarray(start));
    },
    flush(controller) {
      release(controller);
    },
  });
}

/** The `id` field of an event from its first bytes, if it is there. */
function eventId(pieces: readonly Uint8Array[]): string | undefined {
  const head: Uint8Array[] = [];
  let bytes = 0;
  for (const piece of pieces) {
    if (bytes >= EVENT_ID_SEARCH_BYTES) break;
    head.push(piece.subarray(0, EVENT_ID_SEARCH_BYTES - bytes));
    bytes += head.at(-1)!.length;
  }
  const lines = new TextDecoder().decode(Buffer.concat(head)).split(/\r\n|\r|\n/);
  // The last line may be cut short.
  for (const line of lines.slice(0, -1)) {
    if (line === 'id' || line.startsWith('id:')) {
      const value = line.slice(3).replace(/^ /, '');
      return value.includes('\0') ? undefined : value;
    }
  }
  return undefined;
}

/** The ids of the JSON-RPC requests a POST body carries (one message or a batch). */
function requestIds(body: unknown): (string | number)[] {
  if (typeof body !== 'string') return [];
  let parsed: unknown;
  try {
    parsed = JSON.parse(body);
  } catch {
    return [];
  }
  const messages = Array.isArray(parsed) ? (parsed as unknown[]) : [parsed];
  return messages.flatMap((m) => {
    const { id, method } = (m ?? {}) as { id?: unknown; method?: unknown };
    return typeof method === 'string' && (typeof id === 'string' || typeof id === 'number') ? [id] : [];
  });
}

/** SSE events answering each of `ids` with an internal error saying `message`. */
function errorsFor(ids: readonly (string | number)[], message: string): string {
  return ids
    .map(
      (id) => `event: message\ndata: ${JSON.stringify({ jsonrpc: '2.0', id, error: { code: -32603, message } })}\n\n`,
    )
    .join('');
}
