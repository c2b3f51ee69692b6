// Test scaffolding: a real scheduler HTTP server hosting the endpoint, and
// in-process runtimes dialing it. Everything listens on 127.0.0.1:0.
import { EventEmitter, once } from 'node:events';
import http from 'node:http';
import type http2 from 'node:http2';
import type { AddressInfo } from 'node:net';
import { finished } from 'node:stream/promises';
import { within } from '@switchyard/clock/testing';
import type { RuntimeInfo } from '@switchyard/protocol';
import { createTunnelEndpoint, dialTunnel, proxyToTunnel, relayConnection } from '../src/index.ts';
import type { DialTunnelOptions, Tunnel, TunnelDialer, TunnelEndpoint, TunnelEndpointOptions } from '../src/index.ts';

export const TOKEN = 'join-token-0123456789abcdef';

export interface LogLine {
  readonly level: string;
  readonly obj: object;
  readonly msg: string;
}

export function captureLogger(): { logger: TunnelEndpointOptions['logger'] & object; lines: LogLine[] } {
  const lines: LogLine[] = [];
  const push = (level: string) => (obj: object, msg: string) => void lines.push({ level, obj, msg });
  return { logger: { info: push('info'), warn: push('warn'), error: push('error') }, lines };
}

export function runtimeInfo(id: string): RuntimeInfo {
  return { id, classes: ['demo'], metadata: {}, version: '1.0.0', limits: {} };
}

export function encodeInfo(info: unknown): string {
  return Buffer.from(JSON.stringify(info)).toString('base64url');
}

/** Polls real I/O progress (not time-based state) until `ok()` holds or `limitMs` passes. */
export async function until(ok: () => boolean, limitMs = 5000): Promise<void> {
  const start = performance.now();
  while (!ok()) {
    if (performance.now() - start > limitMs) throw new Error('condition not reached');
    await new Promise((r) => setImmediate(r));
  }
}

export interface Scheduler {
  readonly endpoint: TunnelEndpoint;
  readonly server: http.Server;
  readonly port: number;
  readonly url: string;
  readonly events: EventEmitter;
  readonly logs: LogLine[];
  /** Connect requests received (`/api/runtime/connect` upgrades), accepted or refused. */
  readonly connects: { count: number };
  /** Resolves with the next tunnel accepted for `runtimeId`. */
  nextTunnel(runtimeId: string): Promise<Tunnel>;
  close(): Promise<void>;
}

/**
 * A scheduler: the endpoint on `/api/runtime/connect`, the proxy on
 * `/proxy/:runtime/*`, relay connections on `/relay/:runtime`.
 */
export async function startScheduler(options: Partial<TunnelEndpointOptions> = {}, port = 0): Promise<Scheduler> {
  const events = new EventEmitter();
  events.setMaxListeners(100);
  const { logger, lines } = captureLogger();
  const endpoint = createTunnelEndpoint({
    tokens: () => [TOKEN],
    maxRuntimes: 8,
    logger,
    ...options,
    onTunnel: (t) => events.emit('tunnel', t),
    onTunnelClosed: (t, reason) => events.emit('closed', t, reason),
  });
  const server = http.createServer((req, res) => {
    const match = /^\/proxy\/([^/]+)(\/.*)$/.exec(req.url ?? '');
    if (!match) return void res.writeHead(404).end();
    proxyToTunnel(endpoint.get(match[1]!), req, res, match[2]!, { runtimeId: match[1]! });
  });
  const connects = { count: 0 };
  server.on('upgrade', (req, socket, head) => {
    const relay = /^\/relay\/([^/]+)$/.exec(req.url ?? '');
    if (relay) return relayConnection(endpoint.get(relay[1]!), socket, head, relay[1]!);
    connects.count++;
    endpoint.handleUpgrade(req, socket, head);
  });
  server.listen(port, '127.0.0.1');
  await once(server, 'listening');
  const actual = (server.address() as AddressInfo).port;
  return {
    endpoint,
    server,
    port: actual,
    url: `http://127.0.0.1:${actual}`,
    events,
    logs: lines,
    connects,
    nextTunnel: (runtimeId) =>
      new Promise((resolve) => {
        const listener = (t: Tunnel): void => {
          if (t.runtimeId !== runtimeId) return;
          events.off('tunnel', listener);
          resolve(t);
        };
        events.on('tunnel', listener);
      }),
    async close() {
      endpoint.close();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** Dials `scheduler` as runtime `id` and waits until the scheduler holds the tunnel. */
export async function startRuntime(
  scheduler: Scheduler,
  id: string,
  handler: (req: http2.Http2ServerRequest, res: http2.Http2ServerResponse) => void,
  options: Partial<DialTunnelOptions> = {},
): Promise<{ dialer: TunnelDialer; tunnel: Tunnel }> {
  const accepted = scheduler.nextTunnel(id);
  const dialer = dialTunnel({ url: scheduler.url, token: TOKEN, info: runtimeInfo(id), handler, ...options });
  return { dialer, tunnel: await accepted };
}

/**
 * Reads a whole HTTP/2 response stream. The reader attaches before the first
 * await: a response whose END_STREAM arrives in the same read as its HEADERS
 * closes the HTTP/2 stream before an `await once(stream, 'response')` resumes,
 * and a stream iterated only then reports a premature close.
 */
export async function readStream(stream: http2.ClientHttp2Stream): Promise<{ status: number; body: string }> {
  const chunks: Buffer[] = [];
  stream.on('data', (chunk: Buffer) => chunks.push(chunk));
  const response = once(stream, 'response');
  // Rejects for a stream reset before its end, with or without a head (then 'response' never comes).
  await finished(stream, { writable: false });
  const [headers] = (await response) as [http2.IncomingHttpHeaders];
  return { status: Number(headers[':status']), body: Buffer.concat(chunks).toString('utf8') };
}

/** A plain HTTP/1.1 request; resolves with status, headers and body. */
export function httpRequest(
  url: string,
  init: { method?: string; headers?: http.OutgoingHttpHeaders; body?: string } = {},
): Promise<{ status: number; headers: http.IncomingHttpHeaders; body: string }> {
  return new Promise((resolve, reject) => {
    const req = http.request(url, { method: init.method ?? 'GET', headers: init.headers, agent: false }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.once('end', () =>
        resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks).toString('utf8') }),
      );
      res.once('error', reject);
    });
    req.once('error', reject);
    req.end(init.body);
  });
}

/** Resolves once `stream` has closed (reset or ended), or rejects after `limitMs`. */
export async function closesWithin(stream: http2.Http2Stream, limitMs: number): Promise<void> {
  if (stream.closed) return;
  // Not events.once: a reset comes with an 'error' first, which would reject it.
  await within(new Promise((resolve) => stream.once('close', resolve)), limitMs, 'the stream is still open');
}

/**
 * A peer that answers an upgrade with 101 (whichever the runtime asked for)
 * and closes the connection at once; with `websocketTo`, WebSocket upgrades
 * go on to that scheduler instead (a front that passes only WebSocket but
 * claims any upgrade). `dropped` counts the upgrades answered and dropped.
 */
export async function upgradeDropper(
  websocketTo?: Scheduler,
): Promise<{ url: string; dropped: () => number; close: () => void }> {
  const server = http.createServer();
  let dropped = 0;
  server.on('upgrade', (req, socket, head) => {
    if (websocketTo && req.headers.upgrade === 'websocket') {
      return websocketTo.endpoint.handleUpgrade(req, socket, head);
    }
    dropped++;
    // The runtime's HTTP/2 preface may meet the closed socket: its reset is the point here, not a failure.
    socket.on('error', () => {});
    socket.end(`HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: ${req.headers.upgrade}\r\n\r\n`);
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    dropped: () => dropped,
    close: () => {
      server.closeAllConnections();
      server.close();
    },
  };
}

/** Sends a raw WebSocket upgrade to the connect path: the status, and the JSON body of a refusal (none on 101). */
export function rawConnect(
  scheduler: Scheduler,
  headers: http.OutgoingHttpHeaders,
): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = http.request(`${scheduler.url}/api/runtime/connect`, {
      agent: false,
      headers: {
        connection: 'Upgrade',
        upgrade: 'websocket',
        'sec-websocket-version': '13',
        'sec-websocket-key': 'dGhlIHNhbXBsZSBub25jZQ==',
        ...headers,
      },
    });
    req.once('upgrade', (res, socket) => {
      socket.destroy();
      resolve({ status: res.statusCode ?? 0, body: '' });
    });
    req.once('response', (res) => {
      let body = '';
      res.on('data', (c: Buffer) => (body += c.toString()));
      res.once('end', () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.once('error', reject);
    req.end();
  });
}
