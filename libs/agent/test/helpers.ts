import { createServer } from 'node:http';
import { after, afterEach, before } from 'node:test';
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { SwitchyardError } from '@switchyard/protocol';
import { RuntimeMirror, watchRuntime } from '../src/index.ts';
import type { RuntimeWatcher, WatchRuntimeOptions } from '../src/index.ts';

type Http1Handler = (req: IncomingMessage, res: ServerResponse) => void;

/** A real HTTP server on 127.0.0.1, port 0, whose handler can be swapped between cases. */
export interface TestServer {
  readonly url: string;
  handler: Http1Handler;
  /** Cuts every open connection, as a network failure would. */
  dropConnections(): void;
  close(): Promise<void>;
}

/**
 * For the test file that calls it, at its top level: a server started before its tests and closed after
 * them, answering nothing until a test sets its `handler`, and `cleanups` run after each test.
 */
export function fileServer(): TestServer & { readonly cleanups: (() => void)[] } {
  let started: TestServer | undefined;
  const cleanups: (() => void)[] = [];
  before(async () => {
    started = await startServer((_req, res) => res.end());
  });
  after(() => started?.close());
  afterEach(() => {
    for (const cleanup of cleanups.splice(0)) cleanup();
  });
  return {
    cleanups,
    get url() {
      return started!.url;
    },
    get handler() {
      return started!.handler;
    },
    set handler(handler: Http1Handler) {
      started!.handler = handler;
    },
    dropConnections: () => started!.dropConnections(),
    close: () => started!.close(),
  };
}

export async function startServer(handler: Http1Handler): Promise<TestServer> {
  const server: Server = createServer((req, res) => state.handler(req, res));
  const state: TestServer = {
    url: '',
    handler,
    dropConnections: () => server.closeAllConnections(),
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  Object.assign(state, { url: `http://127.0.0.1:${port}` });
  return state;
}

export interface SseEvent {
  readonly event: string;
  readonly id: string | undefined;
  readonly data: string;
}

/** Reads raw SSE frames (comments included, as event `:`) from a fetch response, for wire-level assertions. */
export class SseReader {
  readonly #reader: ReadableStreamDefaultReader<Uint8Array>;
  readonly #decoder = new TextDecoder();
  #buffer = '';

  constructor(response: Response) {
    this.#reader = response.body!.getReader();
  }

  /** The next frame; rejects when the stream ends first. */
  async next(): Promise<SseEvent> {
    for (;;) {
      const end = this.#buffer.indexOf('\n\n');
      if (end >= 0) {
        const frame = this.#buffer.slice(0, end);
        this.#buffer = this.#buffer.slice(end + 2);
        return parseFrame(frame);
      }
      const { done, value } = await this.#reader.read();
      if (done) throw new Error('stream ended');
      this.#buffer += this.#decoder.decode(value, { stream: true });
    }
  }

  /** The next frame that is not a comment. */
  async nextEvent(): Promise<SseEvent> {
    for (;;) {
      const frame = await this.next();
      if (frame.event !== ':') return frame;
    }
  }

  async cancel(): Promise<void> {
    await this.#reader.cancel().catch(() => undefined);
  }
}

function parseFrame(frame: string): SseEvent {
  if (frame.startsWith(':')) return { event: ':', id: undefined, data: frame.slice(1).trim() };
  let event = 'message';
  let id: string | undefined;
  const data: string[] = [];
  for (const line of frame.split('\n')) {
    const colon = line.indexOf(':');
    const field = line.slice(0, colon);
    const value = line.slice(colon + 1).replace(/^ /, '');
    if (field === 'event') event = value;
    else if (field === 'id') id = value;
    else if (field === 'data') data.push(value);
  }
  return { event, id, data: data.join('\n') };
}

/** A promise with its resolver, for waiting on callbacks instead of sleeping. */
export function deferred<T = void>(): { promise: Promise<T>; resolve: (value: T) => void } {
  let resolve!: (value: T) => void;
  const promise = new Promise<T>((r) => (resolve = r));
  return { promise, resolve };
}

/** Resolves when `predicate` holds, re-checked whenever `poke` is called. */
export class Waiter {
  #waits: { predicate: () => boolean; resolve: () => void }[] = [];

  until(predicate: () => boolean): Promise<void> {
    if (predicate()) return Promise.resolve();
    return new Promise((resolve) => this.#waits.push({ predicate, resolve }));
  }

  poke(): void {
    this.#waits = this.#waits.filter((w) => {
      if (!w.predicate()) return true;
      w.resolve();
      return false;
    });
  }
}

/** What `followWatch` gives: the mirror the stream fills, a waiter poked at each callback, and counts. */
export interface Followed {
  readonly mirror: RuntimeMirror;
  readonly waiter: Waiter;
  readonly seen: { snapshots: number; deltas: number; errors: SwitchyardError[] };
  readonly watcher: RuntimeWatcher;
}

/**
 * Follows the `/watch` stream at `url` with the real watcher over fetch, no reconnect delay, into a
 * RuntimeMirror; `options` override the watcher's. The watcher is closed by the cleanup it pushes.
 */
export function followWatch(
  url: string,
  cleanups: (() => void)[],
  options: Partial<WatchRuntimeOptions> = {},
): Followed {
  const mirror = new RuntimeMirror();
  const waiter = new Waiter();
  const seen = { snapshots: 0, deltas: 0, errors: [] as SwitchyardError[] };
  const watcher = watchRuntime({
    url,
    fetch,
    reconnectMs: 0,
    onSnapshot: (s) => (seen.snapshots++, mirror.applySnapshot(s), waiter.poke()),
    onOps: (ops) => (seen.deltas++, mirror.applyOps(ops), waiter.poke()),
    onError: (e) => (seen.errors.push(e), waiter.poke()),
    ...options,
  });
  cleanups.push(() => watcher.close());
  return { mirror, waiter, seen, watcher };
}
