// What the tunnel suites share: the runtime's byte-serving handler, reading
// it back over an HTTP/2 stream, and timing paths in interleaved rounds.
import { once } from 'node:events';
import type http from 'node:http';
import type http2 from 'node:http2';

const CHUNK = Buffer.alloc(256 * 1024, 0x61);
const MB = 1_000_000;

type Res = http.ServerResponse | http2.Http2ServerResponse;

/** `/bytes/<n>` answers n bytes (backpressure respected); anything else a short text. */
export async function serveBytes(req: { url?: string }, res: Res): Promise<void> {
  const match = /^\/bytes\/(\d+)$/.exec(req.url ?? '');
  if (!match) return void res.end('ok');
  let left = Number(match[1]);
  // Both response kinds share this surface; the union's overloads just do not unify for tsc.
  const out = res as http.ServerResponse;
  out.writeHead(200, { 'content-type': 'application/octet-stream' });
  while (left > 0) {
    const piece = left >= CHUNK.length ? CHUNK : CHUNK.subarray(0, left);
    left -= piece.length;
    if (!out.write(piece)) await once(out, 'drain');
  }
  out.end();
}

/** Opens an HTTP/2 stream to the runtime: through a tunnel, or on a baseline connection. */
export type OpenStream = (headers: http2.OutgoingHttpHeaders) => http2.ClientHttp2Stream;

/** Reads `/bytes/<n>` on a stream `open` gives; resolves with the bytes received. */
export async function streamBytes(open: OpenStream, bytes: number): Promise<number> {
  const stream = open({ ':path': `/bytes/${bytes}` });
  let received = 0;
  for await (const chunk of stream) received += (chunk as Buffer).length;
  if (received !== bytes) throw new Error(`stream delivered ${received} of ${bytes} bytes`);
  return received;
}

/** MB/s of `bytes` moved in `ms`. */
export const rate = (bytes: number, ms: number): number => bytes / MB / (ms / 1000);

async function timed(fn: () => Promise<unknown>): Promise<number> {
  const start = performance.now();
  await fn();
  return performance.now() - start;
}

/**
 * Runs each of `runs` `rounds` times, each round starting one later (with
 * two, they alternate): on a shared machine load drifts within seconds, and
 * one long run after the other charged that drift to whichever ran during a
 * busy spell. Resolves with the total milliseconds each took, in order.
 */
export async function interleaved(rounds: number, ...runs: Array<() => Promise<unknown>>): Promise<number[]> {
  const totals = runs.map(() => 0);
  for (let r = 0; r < rounds; r++) {
    for (let i = 0; i < runs.length; i++) {
      const which = (r + i) % runs.length;
      totals[which]! += await timed(runs[which]!);
    }
  }
  return totals;
}
