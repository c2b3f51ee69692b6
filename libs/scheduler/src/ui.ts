import { readFileSync } from 'node:fs';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Clock, Timer } from '@switchyard/clock';
import { runtimeStateOf, type Runtime, type RuntimeStateName } from '@switchyard/protocol';
import type { RuntimeSummary } from '@switchyard/scheduling';
import { sendJson } from './http-util.ts';

/**
 * What the live page shows, as one JSON object per SSE `state` event. This is
 * the page's own wire type (not part of `@switchyard/protocol`): it may grow
 * fields; the page ignores the ones it does not know.
 */
export interface UiState {
  readonly replica: string;
  /** Milliseconds since the epoch on the replica's clock, so the page can plot time. */
  readonly timeMs: number;
  readonly isLeader: boolean;
  readonly leader: { readonly id: string; readonly url: string } | null;
  readonly term: number;
  /** Latest epoch applied here; null before the first commit. */
  readonly epoch: number | null;
  /**
   * Milliseconds since this replica last knew `epoch` to be the newest (a commit applied, or a sync cycle that
   * changed nothing); null with no epoch. It grows while no leader reaches the replica: its view is then frozen.
   */
  readonly epochAgeMs: number | null;
  readonly counts: { readonly runtimes: number; readonly processes: number; readonly threads: number };
  readonly runtimes: ReadonlyArray<UiRuntime>;
}

export type UiRuntime = Pick<Runtime, 'id' | 'owner' | 'classes' | 'version' | 'idleWeight'> & {
  /** Available, draining (no new sandbox, its sessions go on) or unavailable. */
  readonly state: RuntimeStateName;
  readonly processes: number;
  readonly threads: number;
};

export interface LiveUiOptions {
  readonly clock: Clock;
  /** Current state; called once per tick and per notification, shared by all subscribers. */
  readonly state: () => UiState;
  /** Most concurrent `/ui/events` subscribers; one more gets a 503. Default 32. */
  readonly subscribersMax?: number;
  /** Period of state events. Default 1000 ms. */
  readonly intervalMs?: number;
  /** Period of SSE comment lines that keep idle proxies from cutting the stream. Default 15,000 ms. */
  readonly keepAliveMs?: number;
  /** A subscriber with more unsent bytes than this skips ticks; at 4× it is dropped. Default 256 KiB. */
  readonly bufferedBytesMax?: number;
}

export interface LiveUi {
  /** Serves `/ui`, its static files and `/ui/events`; false for any other path. */
  handle(req: IncomingMessage, res: ServerResponse): boolean;
  /** Something changed (epoch, leader): push the state to every subscriber now. */
  notify(): void;
  readonly subscribers: number;
  /** Ends every stream and stops the timers. Idempotent. */
  close(): void;
}

/** Fixed set of files, read once: the page needs no build step and no external URL. */
const STATIC_FILES: Readonly<Record<string, { file: string; type: string }>> = {
  '/ui': { file: 'index.html', type: 'text/html; charset=utf-8' },
  '/ui/app.js': { file: 'app.js', type: 'text/javascript; charset=utf-8' },
  '/ui/style.css': { file: 'style.css', type: 'text/css; charset=utf-8' },
};
const SSE_HEADERS = {
  'content-type': 'text/event-stream; charset=utf-8',
  'cache-control': 'no-store',
  'x-accel-buffering': 'no',
} as const;
const STATIC_DIR = new URL('../static/', import.meta.url);
// A strict policy: the page loads only its own files and opens only its own stream.
const CSP = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:";

let staticCache: Map<string, Buffer> | undefined;
function staticBody(file: string): Buffer {
  staticCache ??= new Map(Object.values(STATIC_FILES).map((f) => [f.file, readFileSync(new URL(f.file, STATIC_DIR))]));
  return staticCache.get(file)!;
}

/** Builds the page state from the replica's view; runtimes come sorted by id so the page is stable. */
export function uiStateOf(input: {
  readonly replicaId: string;
  readonly nowMs: number;
  readonly isLeader: boolean;
  readonly leader: { id: string; url: string } | undefined;
  readonly term: number;
  readonly epoch: number | null;
  readonly epochAgeMs: number | null;
  readonly counts: UiState['counts'];
  /** Sorted by id, as ClusterIndex.summaries returns them. */
  readonly summaries: readonly RuntimeSummary[];
}): UiState {
  const runtimes = input.summaries.map(({ runtime: r, processes, threads }) => ({
    id: r.id,
    owner: r.owner,
    state: runtimeStateOf(r),
    classes: r.classes,
    version: r.version,
    idleWeight: r.idleWeight,
    processes,
    threads,
  }));
  return {
    replica: input.replicaId,
    timeMs: input.nowMs,
    isLeader: input.isLeader,
    leader: input.leader ?? null,
    term: input.term,
    epoch: input.epoch,
    epochAgeMs: input.epochAgeMs,
    counts: input.counts,
    runtimes,
  };
}

/**
 * The live page of a replica. Guarantees: every subscriber gets the state
 * on connect, then at least every `intervalMs` while it keeps up, and
 * promptly after `notify()`; subscribers are capped. Not guaranteed: that a
 * slow subscriber sees every state (it skips ticks rather than buffer them).
 */
export function createLiveUi(options: LiveUiOptions): LiveUi {
  const subscribersMax = options.subscribersMax ?? 32;
  const intervalMs = options.intervalMs ?? 1000;
  const keepAliveMs = options.keepAliveMs ?? 15_000;
  const bufferedBytesMax = options.bufferedBytesMax ?? 256 * 1024;
  const subscribers = new Set<ServerResponse>();
  let tick: Timer | undefined;
  let keepAlive: Timer | undefined;
  let closed = false;

  const write = (frame: string): void => {
    for (const res of subscribers) {
      if (res.writableLength > 4 * bufferedBytesMax) res.destroy();
      else if (res.writableLength <= bufferedBytesMax) res.write(frame);
    }
  };
  const broadcast = (): void => write(stateFrame(options.state()));
  // Two independent timers, both stopped while nobody listens: state ticks, and comments
  // that keep the stream visibly alive even if a deployment slows the ticks down.
  const schedule = (): void => {
    tick?.cancel();
    tick = undefined;
    if (closed || subscribers.size === 0) return;
    tick = options.clock.setTimeout(() => {
      broadcast();
      schedule();
    }, intervalMs);
  };
  const scheduleKeepAlive = (): void => {
    keepAlive?.cancel();
    keepAlive = undefined;
    if (closed || subscribers.size === 0) return;
    keepAlive = options.clock.setTimeout(() => {
      write(': keep-alive\n\n');
      scheduleKeepAlive();
    }, keepAliveMs);
  };

  const subscribe = (res: ServerResponse): void => {
    if (closed || subscribers.size >= subscribersMax) {
      res.setHeader('retry-after', '5');
      return sendJson(res, 503, { error: 'too many live page subscribers', code: 'capacity_exhausted' });
    }
    res.writeHead(200, SSE_HEADERS);
    res.write(`retry: 2000\n\n${stateFrame(options.state())}`);
    subscribers.add(res);
    const drop = (): void => {
      if (!subscribers.delete(res) || subscribers.size > 0) return;
      schedule();
      scheduleKeepAlive();
    };
    // The response's close, not the request's: a request closes as soon as its (empty) body is read.
    res.once('close', drop);
    if (subscribers.size === 1) {
      schedule();
      scheduleKeepAlive();
    }
  };

  return {
    handle(req, res) {
      const path = (req.url ?? '/').split('?', 1)[0]!;
      if (path !== '/ui' && !path.startsWith('/ui/')) return false;
      req.resume();
      if (req.method !== 'GET' && req.method !== 'HEAD') {
        res.setHeader('allow', 'GET');
        sendJson(res, 405, { error: 'method not allowed', code: 'method_not_allowed' });
        return true;
      }
      if (path === '/ui/events') {
        // A HEAD response has no body to stream (writes to it are dropped, headers and all): headers, then done.
        if (req.method === 'HEAD') res.writeHead(200, SSE_HEADERS).end();
        else subscribe(res);
        return true;
      }
      // The page uses relative URLs (`ui/app.js`), which resolve right from `/ui` only.
      if (path === '/ui/') {
        res.writeHead(308, { location: '/ui' }).end();
        return true;
      }
      const entry = STATIC_FILES[path];
      if (!entry) {
        sendJson(res, 404, { error: `no route for GET ${path}`, code: 'not_found' });
        return true;
      }
      const body = staticBody(entry.file);
      res.writeHead(200, {
        'content-type': entry.type,
        'content-length': body.length,
        'cache-control': 'no-cache',
        'content-security-policy': CSP,
        'x-content-type-options': 'nosniff',
      });
      res.end(req.method === 'HEAD' ? undefined : body);
      return true;
    },
    notify() {
      if (closed || subscribers.size === 0) return;
      broadcast();
      schedule();
    },
    get subscribers() {
      return subscribers.size;
    },
    close() {
      if (closed) return;
      closed = true;
      tick?.cancel();
      keepAlive?.cancel();
      for (const res of subscribers) res.end();
      subscribers.clear();
    },
  };
}

function stateFrame(state: UiState): string {
  return `event: state\ndata: ${JSON.stringify(state)}\n\n`;
}
