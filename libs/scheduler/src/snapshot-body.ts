import type { ServerResponse } from 'node:http';
import { setImmediate as nextTurn } from 'node:timers/promises';
import type { RuntimeState } from '@switchyard/protocol';
import { publicRuntime } from './public-runtime.ts';

/**
 * Characters gathered before a write. A kept epoch of a large fleet is tens
 * of MB of JSON (1,000,000 threads: 47 MB, 0.6–1.2 s of `JSON.stringify`),
 * which serialised at once holds up every other request of the replica;
 * this much serialises in well under a millisecond.
 */
const CHUNK_CHARS = 64 * 1024;
/** List items serialised at once: one runtime may hold up to 1,000,000 threads, so runtimes are cut up too. */
const SLICE_ITEMS = 1024;

/**
 * Answers 200 with `{epoch, runtimes}` (the body of `GET /api/epoch/:id/snapshot`),
 * serialised and written a chunk at a time: the event loop gets a turn
 * after every chunk, and a client that reads slowly is waited for
 * (`drain`), so neither the serialisation nor the buffer grows with the
 * fleet. Stops, writing nothing more, once the response is destroyed.
 * `runtimes` is read while the stream lasts, so it must not change meanwhile
 * (kept epochs never do).
 */
export async function sendSnapshot(
  res: ServerResponse,
  method: string | undefined,
  epoch: number,
  runtimes: readonly RuntimeState[],
): Promise<void> {
  res.writeHead(200, { 'content-type': 'application/json', 'cache-control': 'no-store' });
  if (method === 'HEAD') return void res.end();
  let pending = '';
  for (const piece of snapshotPieces(epoch, runtimes)) {
    pending += piece;
    if (pending.length < CHUNK_CHARS) continue;
    if (!(await write(res, pending))) return;
    pending = '';
  }
  res.end(pending);
}

/** The JSON text of `{epoch, runtimes}`, as `JSON.stringify` writes it, in pieces of bounded size. */
function* snapshotPieces(epoch: number, runtimes: readonly RuntimeState[]): Generator<string> {
  yield `{"epoch":${epoch},"runtimes":[`;
  for (let i = 0; i < runtimes.length; i++) {
    const { runtime, processes, threads } = runtimes[i]!;
    yield `${i === 0 ? '' : ','}{"runtime":${JSON.stringify(publicRuntime(runtime))},"processes":`;
    yield* listPieces(processes);
    yield ',"threads":';
    yield* listPieces(threads);
    yield '}';
  }
  yield ']}';
}

function* listPieces(list: readonly unknown[]): Generator<string> {
  if (list.length === 0) {
    yield '[]';
    return;
  }
  for (let from = 0; from < list.length; from += SLICE_ITEMS) {
    const items = JSON.stringify(list.slice(from, from + SLICE_ITEMS));
    yield `${from === 0 ? '[' : ','}${items.slice(1, -1)}`;
  }
  yield ']';
}

/** Writes `text` and waits for the next turn of the event loop, or for `drain`; false once `res` is destroyed. */
async function write(res: ServerResponse, text: string): Promise<boolean> {
  if (res.destroyed) return false;
  if (res.write(text)) await nextTurn();
  else await drainedOrClosed(res);
  return !res.destroyed;
}

function drainedOrClosed(res: ServerResponse): Promise<void> {
  return new Promise((resolve) => {
    const done = (): void => {
      res.off('drain', done);
      res.off('close', done);
      resolve();
    };
    res.on('drain', done);
    res.on('close', done);
  });
}
