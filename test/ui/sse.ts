// A minimal SSE client for tests: records every frame (events and comment
// lines) of a stream so a test can assert the exact frames on the wire.
export interface SseFrame {
  readonly event?: string;
  readonly data?: string;
  readonly comment?: string;
  readonly retry?: number;
}

const FRAMES_MAX = 10_000;

function parseBlock(block: string): SseFrame {
  const frame: { event?: string; data?: string; comment?: string; retry?: number } = {};
  for (const line of block.split('\n')) {
    if (line.startsWith(':')) frame.comment = line.slice(1).trim();
    else if (line.startsWith('event: ')) frame.event = line.slice(7);
    else if (line.startsWith('data: '))
      frame.data = (frame.data === undefined ? '' : `${frame.data}\n`) + line.slice(6);
    else if (line.startsWith('retry: ')) frame.retry = Number(line.slice(7));
  }
  return frame;
}

export class SseStream {
  readonly status: number;
  readonly headers: Headers;
  readonly frames: SseFrame[] = [];
  #controller: AbortController;
  #cursor = 0;
  #wake: (() => void) | undefined;
  #ended = false;

  private constructor(response: Response, controller: AbortController) {
    this.status = response.status;
    this.headers = response.headers;
    this.#controller = controller;
    if (response.body) void this.#pump(response.body);
  }

  static async open(url: string): Promise<SseStream> {
    const controller = new AbortController();
    const response = await fetch(url, { signal: controller.signal, headers: { accept: 'text/event-stream' } });
    return new SseStream(response, controller);
  }

  async #pump(body: ReadableStream<Uint8Array>): Promise<void> {
    const decoder = new TextDecoder();
    let buffer = '';
    try {
      for await (const chunk of body) {
        buffer += decoder.decode(chunk, { stream: true });
        for (let end = buffer.indexOf('\n\n'); end >= 0; end = buffer.indexOf('\n\n')) {
          if (this.frames.length < FRAMES_MAX) this.frames.push(parseBlock(buffer.slice(0, end)));
          buffer = buffer.slice(end + 2);
        }
        this.#wake?.();
      }
    } catch {
      // Aborted by close(), or the server ended the stream.
    } finally {
      this.#ended = true;
      this.#wake?.();
    }
  }

  /** The next unseen `state` event whose data matches `predicate`; fails after `timeoutMs`. */
  async nextState<T>(predicate: (state: T) => boolean = () => true, timeoutMs = 5000): Promise<T> {
    const deadline = performance.now() + timeoutMs;
    for (;;) {
      while (this.#cursor < this.frames.length) {
        const frame = this.frames[this.#cursor++]!;
        if (frame.event !== 'state' || frame.data === undefined) continue;
        const state = JSON.parse(frame.data) as T;
        if (predicate(state)) return state;
      }
      if (this.#ended) throw new Error('stream ended');
      const left = deadline - performance.now();
      if (left <= 0) throw new Error(`no matching state within ${timeoutMs} ms`);
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, left);
        this.#wake = () => {
          clearTimeout(timer);
          resolve();
        };
      });
    }
  }

  close(): void {
    this.#controller.abort();
  }
}
