import type { ServerResponse } from 'node:http';
import type { AnyResponse } from '@switchyard/agent';

type Head = [status: number, headers: Record<string, string> | undefined];
/** The response surface the MCP handler uses; both response kinds have it. */
type Writable = Pick<ServerResponse, 'writeHead' | 'write' | 'end' | 'destroyed' | 'statusCode' | 'setHeader'>;

/**
 * On HTTP/1.1 Node sends a response head with the first body write. A
 * legacy GET stream may stay silent for minutes, and a proxy in front (a
 * gateway in direct mode) waits for the head before it answers its own
 * client; so a GET's event stream head goes out at once, as HTTP/2 (the
 * tunnel) sends HEADERS.
 */
export function flushingEventStreams(res: AnyResponse): AnyResponse {
  if ('stream' in res) return res;
  const out = res as ServerResponse;
  const writeHead = out.writeHead.bind(out) as (status: number, headers?: Record<string, string>) => ServerResponse;
  out.writeHead = ((status: number, headers?: Record<string, string>) => {
    writeHead(status, headers);
    if (isEventStream(headers)) out.flushHeaders();
    return out;
  }) as ServerResponse['writeHead'];
  return res;
}

/**
 * Holds a POST answer for the rest of the event-loop turn it starts in. An
 * answer that also ends in that turn — a tool call's one-event SSE body, a
 * JSON reply — leaves as one piece with its length declared, so every proxy
 * on the way (the scheduler's tunnel relay, the gateway) can finish it at
 * its last byte instead of waiting for an end-of-stream that would cross
 * each hop as a message of its own. An answer still open when the turn ends
 * is sent as written so far and streams on unchanged (progress, long tools).
 */
export function wholeWhenQuick(res: AnyResponse): AnyResponse {
  const out = res as unknown as Writable;
  const original = { writeHead: out.writeHead, write: out.write, end: out.end };
  let head: Head | undefined;
  const held: Buffer[] = [];
  let timer: NodeJS.Immediate | undefined;
  const restore = (): void => {
    if (timer) clearImmediate(timer);
    Object.assign(out, original);
  };
  const release = (): void => {
    restore();
    if (out.destroyed) return;
    if (head) out.writeHead(...head);
    for (const chunk of held.splice(0)) out.write(chunk);
  };
  out.writeHead = ((status: number, headers?: Record<string, string>) => {
    head = [status, headers];
    timer ??= setImmediate(release);
    return out;
  }) as ServerResponse['writeHead'];
  out.write = ((chunk: string | Uint8Array) => {
    held.push(Buffer.from(chunk));
    timer ??= setImmediate(release);
    return true;
  }) as ServerResponse['write'];
  out.end = ((chunk?: string | Uint8Array) => {
    restore();
    if (chunk !== undefined) held.push(Buffer.from(chunk));
    const body = Buffer.concat(held.splice(0));
    // Not writeHead(): a body handed whole to end() before any header went
    // out gets its length from the transport — Node's HTTP/1.1 server, and
    // the tunnel's HTTP/2 response (LengthDeclaringResponse), which then
    // sends headers, body and END_STREAM as one piece.
    if (head) {
      out.statusCode = head[0];
      for (const [name, value] of Object.entries(head[1] ?? {})) out.setHeader(name, value);
    }
    return out.end(body);
  }) as ServerResponse['end'];
  return res;
}

function isEventStream(headers: Record<string, string> | undefined): boolean {
  for (const [name, value] of Object.entries(headers ?? {})) {
    if (name.toLowerCase() === 'content-type') return String(value).startsWith('text/event-stream');
  }
  return false;
}
