import http from 'node:http';
import https from 'node:https';
import { Socket } from 'node:net';
import { TLSSocket } from 'node:tls';
import WebSocket from 'ws';
import { TUNNEL_DEFAULTS } from './defaults.ts';
import { TUNNEL_UPGRADE, socketCarrier, webSocketCarrier } from './carrier.ts';
import type { Carrier, CarrierTransport } from './carrier.ts';

/** How one connect attempt ended; exactly one is called, once. */
export interface ConnectHandlers {
  onOpen(carrier: Carrier): void;
  /**
   * The server answered without upgrading: a refusal (`status` and up to 4
   * KiB of body), or a 101 to another protocol (`status` 101).
   */
  onRefused(status: number, body: string): void;
  /** No answer. `reached`: the TCP connection was made, so something is listening there. */
  onFailed(reason: string, reached: boolean): void;
}

/**
 * One connect attempt to `url` (`http(s)://…/api/runtime/connect`) with the
 * given headers, asking for `transport`. Returns a cancel that drops the
 * attempt (and a carrier it has not handed over yet).
 */
export function connectCarrier(
  transport: CarrierTransport,
  url: URL,
  headers: Record<string, string>,
  handlers: ConnectHandlers,
  timeoutMs?: number,
): () => void {
  const connect = transport === 'http2' ? connectUpgrade : connectWebSocket;
  if (timeoutMs === undefined) return connect(url, headers, handlers);
  // Nothing else bounds an attempt: a peer that takes the connection and never answers (a replica that is
  // frozen, or cut off after the handshake) would hold it, and the dialer, forever.
  const timer = setTimeout(() => {
    cancel();
    handlers.onFailed(`no answer to the connect request within ${timeoutMs} ms`, false);
  }, timeoutMs);
  timer.unref();
  const settled =
    <A extends unknown[]>(handler: (...args: A) => void) =>
    (...args: A): void => {
      clearTimeout(timer);
      handler(...args);
    };
  const cancel = connect(url, headers, {
    onOpen: settled(handlers.onOpen),
    onRefused: settled(handlers.onRefused),
    onFailed: settled(handlers.onFailed),
  });
  return () => {
    clearTimeout(timer);
    cancel();
  };
}

function connectUpgrade(url: URL, headers: Record<string, string>, h: ConnectHandlers): () => void {
  let settled = false;
  const settle = (): boolean => !settled && (settled = true);
  const client = url.protocol === 'https:' ? https : http;
  const req = client.request(url, {
    agent: false,
    headers: { ...headers, connection: 'Upgrade', upgrade: TUNNEL_UPGRADE },
  });
  let reached = false;
  req.once('socket', (socket) => socket.once('connect', () => (reached = true)));
  req.once('upgrade', (res, socket, head) => {
    if (!settle()) return void socket.destroy();
    if (res.headers.upgrade?.toLowerCase() !== TUNNEL_UPGRADE) {
      socket.destroy();
      return h.onRefused(101, `upgraded to ${res.headers.upgrade ?? 'nothing'}`);
    }
    // The scheduler starts HTTP/2 right behind its 101; those bytes may have come with it.
    if (head.length > 0) socket.unshift(head);
    if (socket instanceof Socket) socket.setNoDelay(true);
    // Inside TLS (an https: URL, TLS ended by a proxy) Node's HTTP/2 server
    // takes a connection's protocol from ALPN, which said HTTP/1.1 or
    // nothing, and would refuse it; the Upgrade switched it to HTTP/2.
    if (socket instanceof TLSSocket) socket.alpnProtocol = 'h2';
    h.onOpen(socketCarrier(socket));
  });
  req.once('response', (res) => readRefusal(res, (status, body) => settle() && h.onRefused(status, body)));
  req.on('error', (error) => settle() && h.onFailed(error.message, reached));
  req.end();
  return () => {
    settled = true;
    req.destroy();
  };
}

function connectWebSocket(url: URL, headers: Record<string, string>, h: ConnectHandlers): () => void {
  let settled = false;
  const settle = (): boolean => !settled && (settled = true);
  const wsUrl = new URL(url);
  wsUrl.protocol = url.protocol === 'https:' ? 'wss:' : 'ws:';
  const ws = new WebSocket(wsUrl, {
    perMessageDeflate: false,
    maxPayload: TUNNEL_DEFAULTS.wsPayloadBytesMax,
    // Masking guards browser-scripted payloads against poisoning caching proxies (RFC 6455 §10.3); here the
    // payload is HTTP/2 frames from our own runtime, and XOR-ing every byte halved single-stream throughput.
    // ws skips the XOR on both ends for an all-zero key.
    generateMask: (mask: Buffer) => void mask.fill(0),
    headers,
  });
  let reached = false;
  ws.once('upgrade', () => (reached = true));
  // Until open, errors and closes are this attempt's; afterwards the carrier reports them.
  const onError = (error: Error): void => void (settle() && h.onFailed(`websocket error: ${error.message}`, reached));
  const onClose = (code: number): void => void (settle() && h.onFailed(`websocket closed (${code})`, reached));
  ws.on('error', onError);
  ws.once('close', onClose);
  ws.once('unexpected-response', (_req, res) =>
    readRefusal(res, (status, body) => settle() && h.onRefused(status, body)),
  );
  ws.once('open', () => {
    if (!settle()) return void ws.terminate();
    ws.off('close', onClose);
    ws.off('error', onError);
    h.onOpen(webSocketCarrier(ws));
  });
  return () => {
    settled = true;
    ws.terminate();
  };
}

/** Reads a refusal's status and its (short JSON) body, keeping at most 4 KiB for the log. */
function readRefusal(res: http.IncomingMessage, done: (status: number, body: string) => void): void {
  const chunks: Buffer[] = [];
  let size = 0;
  res.on('data', (chunk: Buffer) => {
    if (size < 4096) chunks.push(chunk);
    size += chunk.length;
  });
  res.once('end', () => done(res.statusCode ?? 0, Buffer.concat(chunks).toString('utf8').slice(0, 4096)));
  res.once('error', () => done(res.statusCode ?? 0, ''));
}
