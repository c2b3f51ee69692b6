import type { OutgoingHttpHeaders, ServerResponse } from 'node:http';
import type http2 from 'node:http2';
import { isEndToEnd, posesAsSwitchyard } from './headers.ts';

type UpstreamHeaders = http2.IncomingHttpHeaders & http2.IncomingHttpStatusHeader;

const NONE: ReadonlySet<string> = new Set();

/**
 * Copies an HTTP/2 answer to an HTTP/1.1 response. Called on the stream's
 * 'response' event; nothing is written to the client before the end of that
 * turn of the event loop.
 *
 * - A reply with a declared `Content-Length` is complete for the client at
 *   its last byte: an http2 compat runtime sends END_STREAM turns after the
 *   body, and waiting for it cost a tunnel message per round trip.
 * - A reply without one that ends within its first turn (headers, body and
 *   END_STREAM in one tunnel read) gets a `Content-Length` and one write.
 * - Otherwise the headers and what arrived so far leave at the end of the
 *   turn (a silent stream, like an SSE stream before its first event, gets
 *   its headers then), and every later turn's chunks leave in one write.
 * - Backpressure pauses the stream until the client drains (as `pipe()`
 *   would, without its per-request listener set-up and teardown).
 *
 * `overrides` are set on the answer over the runtime's headers of the same name; the runtime's headers named in
 * `dropped` are left out, as is one posing as Switchyard's (`posesAsSwitchyard`).
 *
 * While the first turn lasts `res.headersSent` stays false, so an upstream
 * failure in it can still be answered with a status. Not guaranteed: that the
 * HTTP/2 stream has ended when the client's response has (a runtime that
 * never sends END_STREAM after its declared body holds the stream until the
 * tunnel closes).
 */
export function relayResponse(
  stream: http2.ClientHttp2Stream,
  res: ServerResponse,
  upstream: UpstreamHeaders,
  method: string,
  overrides: OutgoingHttpHeaders = {},
  dropped: ReadonlySet<string> = NONE,
): void {
  const status = Number(upstream[':status']);
  const headers = { ...responseHeaders(upstream, dropped), ...overrides };
  const bodyAllowed = mayHaveBody(method, status);
  // nghttp2 resets a stream whose DATA overruns its Content-Length, so at most `declared` bytes arrive.
  const declared = bodyAllowed ? declaredLength(headers['content-length']) : undefined;
  let relayed = 0;
  // The first turn's chunks; undefined once the headers are written. Bounded
  // by one turn's worth of the stream window.
  let held: Buffer[] | undefined = [];
  let heldBytes = 0;
  let trailers = false;
  let corked = false;

  /** Writes the headers and the held chunks, the bare headers at once when nothing is held (a silent stream). */
  const open = (): void => {
    const chunks = held ?? [];
    held = undefined;
    res.writeHead(status, headers);
    if (chunks.length === 0) res.flushHeaders();
    for (const chunk of chunks) write(chunk);
  };
  /** Ends the client's response; a body still held leaves with it, with its length unless trailers need chunks. */
  const finish = (): void => {
    if (res.writableEnded || res.destroyed) return;
    if (!held) return void res.end();
    const chunks = held;
    held = undefined;
    if (!trailers && bodyAllowed && headers['content-length'] === undefined) headers['content-length'] = heldBytes;
    res.writeHead(status, headers);
    if (chunks.length === 0) res.end();
    else res.end(chunks.length === 1 ? chunks[0] : Buffer.concat(chunks, heldBytes));
  };
  const release = (): void => {
    corked = false;
    if (res.writableEnded || res.destroyed) return;
    if (held) return open();
    const socket = res.socket;
    if (socket && !socket.destroyed && socket.writableCorked > 0) socket.uncork();
  };
  const write = (chunk: Buffer): void => {
    if (!res.write(chunk) && !res.destroyed) {
      stream.pause();
      res.once('drain', resume);
    }
  };
  const resume = (): void => void stream.resume();
  setImmediate(release);

  stream.on('data', (chunk: Buffer) => {
    if (res.writableEnded) return;
    relayed += chunk.length;
    if (held) {
      held.push(chunk);
      heldBytes += chunk.length;
    } else {
      // The socket, not `res`: a corked response buffers chunks apart and its
      // end() would then write the terminating chunk ahead of them.
      if (!corked) {
        corked = true;
        res.socket?.cork();
        setImmediate(release);
      }
      write(chunk);
    }
    if (relayed === declared) finish();
  });
  stream.once('trailers', (fields: http2.IncomingHttpHeaders) => {
    trailers = true;
    const out: Record<string, string> = {};
    for (const name in fields) {
      const value = fields[name];
      if (value !== undefined && isEndToEnd(name)) out[name] = String(value);
    }
    res.addTrailers(out);
  });
  stream.once('end', finish);
  if (declared === 0) finish();
}

function responseHeaders(upstream: UpstreamHeaders, dropped: ReadonlySet<string>): OutgoingHttpHeaders {
  const out: OutgoingHttpHeaders = {};
  for (const name in upstream) {
    const value = upstream[name];
    if (value === undefined || !isEndToEnd(name) || dropped.has(name) || posesAsSwitchyard(name, value)) continue;
    out[name] = value;
  }
  return out;
}

/** A Content-Length value as a byte count; undefined when absent or malformed. */
function declaredLength(value: OutgoingHttpHeaders[string]): number | undefined {
  if (typeof value !== 'string' || !/^\d{1,15}$/.test(value)) return undefined;
  return Number(value);
}

/** Whether a Content-Length describes a body here (RFC 9110 §8.6: not for HEAD, 1xx, 204 or 304). */
function mayHaveBody(method: string, status: number): boolean {
  return method !== 'HEAD' && status >= 200 && status !== 204 && status !== 304;
}
