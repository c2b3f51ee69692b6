import http2 from 'node:http2';
import { Readable } from 'node:stream';
import type { ReadableStream as NodeReadableStream } from 'node:stream/web';
import { isEndToEnd } from './headers.ts';

/** Opens one HTTP/2 stream; throws when the tunnel is down. */
export type OpenStream = (headers: http2.OutgoingHttpHeaders) => http2.ClientHttp2Stream;

/** Body chunks queued in the web stream before the HTTP/2 stream is paused (flow control takes over). */
const RESPONSE_CHUNKS_QUEUED_MAX = 16;

/**
 * A minimal WHATWG `fetch` over HTTP/2 streams: method, headers, string /
 * bytes / ReadableStream bodies, AbortSignal, and a streaming Response body
 * that respects HTTP/2 flow control. No redirects, cookies, caching or
 * decompression; the URL's host becomes `:authority` and only its path and
 * query are sent.
 */
export function createH2Fetch(open: OpenStream): typeof fetch {
  return async (input: string | URL | Request, init?: RequestInit): Promise<Response> => {
    const request = input instanceof Request ? input : undefined;
    const url = new URL(request ? request.url : String(input), 'http://runtime');
    const method = (init?.method ?? request?.method ?? 'GET').toUpperCase();
    const signal = init?.signal ?? request?.signal ?? undefined;
    signal?.throwIfAborted();
    const headers: http2.OutgoingHttpHeaders = {
      ':method': method,
      ':path': `${url.pathname}${url.search}`,
      ':authority': url.host,
      ':scheme': 'http',
    };
    for (const [name, value] of new Headers(init?.headers ?? request?.headers)) {
      if (isEndToEnd(name)) headers[name] = value;
    }
    const stream = open(headers);
    const onAbort = (): void => {
      if (!stream.destroyed) stream.close(http2.constants.NGHTTP2_CANCEL);
    };
    signal?.addEventListener('abort', onAbort, { once: true });
    stream.once('close', () => signal?.removeEventListener('abort', onAbort));
    sendBody(stream, init?.body ?? (request?.body as BodyInit | null | undefined));
    const responseHeaders = await new Promise<http2.IncomingHttpHeaders>((resolve, reject) => {
      stream.once('response', resolve);
      stream.once('error', reject);
      stream.once('close', () => reject(signal?.aborted ? signal.reason : new Error('stream closed before response')));
    });
    const status = Number(responseHeaders[':status']);
    const outHeaders = new Headers();
    for (const [name, value] of Object.entries(responseHeaders)) {
      if (name.startsWith(':') || value === undefined) continue;
      for (const v of Array.isArray(value) ? value : [value]) outHeaders.append(name, String(v));
    }
    const bodyless = method === 'HEAD' || status === 204 || status === 304;
    if (bodyless) stream.resume();
    return new Response(bodyless ? null : webBody(stream, signal), { status, headers: outHeaders });
  };
}

function sendBody(stream: http2.ClientHttp2Stream, body: BodyInit | null | undefined): void {
  if (body === null || body === undefined) return void stream.end();
  if (typeof body === 'string' || body instanceof URLSearchParams) return void stream.end(String(body));
  if (body instanceof ArrayBuffer) return void stream.end(Buffer.from(body));
  if (ArrayBuffer.isView(body)) return void stream.end(Buffer.from(body.buffer, body.byteOffset, body.byteLength));
  if (body instanceof ReadableStream) {
    const source = Readable.fromWeb(body as NodeReadableStream);
    source.once('error', (error) => stream.destroy(error));
    return void source.pipe(stream);
  }
  stream.destroy(new TypeError('unsupported body type'));
}

/** Web view of a response stream: pauses the HTTP/2 stream when the reader lags, cancels it on `cancel()`. */
function webBody(stream: http2.ClientHttp2Stream, signal: AbortSignal | undefined): ReadableStream<Uint8Array> {
  let done = false;
  return new ReadableStream<Uint8Array>(
    {
      start(controller) {
        stream.on('data', (chunk: Buffer) => {
          if (done) return;
          controller.enqueue(new Uint8Array(chunk.buffer, chunk.byteOffset, chunk.byteLength));
          if ((controller.desiredSize ?? 0) <= 0) stream.pause();
        });
        stream.once('end', () => {
          if (!done) controller.close();
          done = true;
        });
        const fail = (error: unknown): void => {
          if (!done) controller.error(error);
          done = true;
        };
        stream.once('error', fail);
        stream.once('close', () => fail(signal?.aborted ? signal.reason : new Error('stream reset before end')));
      },
      pull() {
        stream.resume();
      },
      cancel() {
        done = true;
        if (!stream.destroyed) stream.close(http2.constants.NGHTTP2_CANCEL);
      },
    },
    new CountQueuingStrategy({ highWaterMark: RESPONSE_CHUNKS_QUEUED_MAX }),
  );
}
