import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Http2ServerRequest, Http2ServerResponse } from 'node:http2';
import { SwitchyardError, statusOf } from '@switchyard/protocol';

/** Node's HTTP/1 request or the HTTP/2 compat request: the handlers here use only what both have. */
export type AnyRequest = IncomingMessage | Http2ServerRequest;
export type AnyResponse = ServerResponse | Http2ServerResponse;

/** A `(req, res)` handler that serves both `node:http` and `node:http2` compat objects. */
export interface RequestHandler {
  (req: IncomingMessage, res: ServerResponse): void;
  (req: Http2ServerRequest, res: Http2ServerResponse): void;
}

/** Writes `{error}` with the status of the error's code; anything unknown is a 500 that blames no client. */
export function sendError(res: AnyResponse, error: unknown, headers: Record<string, string> = {}): void {
  const status = statusOf(error);
  const message = error instanceof SwitchyardError ? error.message : 'internal error';
  sendJson(res, status, { error: message }, headers);
}

/**
 * Cuts a response whose head may be out already, so that the peer sees it
 * broken. With an error: over HTTP/2 (the tunnel) a bare destroy() ends the
 * stream cleanly and the peer takes the cut answer for a complete one; with
 * one it is an RST_STREAM, and over HTTP/1.1 a reset connection either way.
 */
export function cutResponse(res: AnyResponse, reason: string): void {
  res.destroy(new Error(reason));
}

export function sendJson(res: AnyResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  if (res.headersSent) {
    cutResponse(res, 'answer failed after its head was sent');
    return;
  }
  const text = JSON.stringify(body);
  (res as ServerResponse).writeHead(status, {
    'content-type': 'application/json',
    'content-length': String(Buffer.byteLength(text)),
    'cache-control': 'no-store',
    ...headers,
  });
  res.end(text);
}

/**
 * Reads a body up to `bytesMax`. Rejects with `body_too_large` as soon as the
 * declared or received length passes it, without reading the rest.
 */
export function readBody(req: AnyRequest, bytesMax: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const declared = Number(req.headers['content-length']);
    if (Number.isFinite(declared) && declared > bytesMax) {
      reject(new SwitchyardError('body_too_large', `body over ${bytesMax} bytes`));
      return;
    }
    const chunks: Buffer[] = [];
    let total = 0;
    const onData = (chunk: Buffer): void => {
      total += chunk.length;
      if (total > bytesMax) {
        cleanup();
        req.resume();
        reject(new SwitchyardError('body_too_large', `body over ${bytesMax} bytes`));
        return;
      }
      chunks.push(chunk);
    };
    const onEnd = (): void => {
      cleanup();
      resolve(Buffer.concat(chunks));
    };
    const onError = (error: Error): void => {
      cleanup();
      reject(new SwitchyardError('invalid_request', 'request body aborted', { cause: error }));
    };
    const cleanup = (): void => {
      req.off('data', onData);
      req.off('end', onEnd);
      req.off('error', onError);
    };
    req.on('data', onData);
    req.on('end', onEnd);
    req.on('error', onError);
  });
}
