// Raw client connections for the tests of listener limits and deadlines:
// one that asks a listener for /healthz on a kept-alive socket, one that
// trickles a header block, a timer of how long a listener holds one, and
// the check of a listener's connectionsMax that the apps' tests share; and
// the status of a bare WebSocket upgrade (a runtime's connect, a peer's sync).
import assert from 'node:assert/strict';
import { once } from 'node:events';
import http from 'node:http';
import type net from 'node:net';
import { connect } from 'node:net';
import type { AppProcess } from '../support/processes.ts';
import { metric } from './support.ts';

/**
 * Sends GET /healthz on `socket` (kept alive), with `headers` (`Name: value` lines) if given, and resolves with
 * the answer's first bytes, '' if it closes first.
 */
export function askHealthz(socket: net.Socket, headers: readonly string[] = []): Promise<string> {
  return new Promise((resolve) => {
    const onData = (chunk: Buffer): void => {
      socket.off('close', onClose);
      resolve(chunk.toString());
    };
    const onClose = (): void => {
      socket.off('data', onData);
      resolve('');
    };
    socket.once('data', onData);
    socket.once('close', onClose);
    socket.write(['GET /healthz HTTP/1.1', 'Host: x', ...headers, '', ''].join('\r\n'));
  });
}

/** Writes `head`, a header block never ended, a byte every second; the returned function stops it. */
export function trickle(head: string): (socket: net.Socket) => () => void {
  return (socket) => {
    let sent = 0;
    const timer = setInterval(() => {
      if (sent < head.length && !socket.destroyed) socket.write(head[sent++]!);
    }, 1000);
    return () => clearInterval(timer);
  };
}

/**
 * Connects to `port` on loopback, runs `feed` on the socket, and resolves
 * with how long the listener held the connection; rejects past `limitMs`.
 */
export function heldFor(
  name: string,
  port: number,
  feed: (socket: net.Socket) => () => void,
  limitMs: number,
): Promise<number> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1');
    const started = performance.now();
    let stop = (): void => {};
    socket.on('connect', () => (stop = feed(socket)));
    socket.on('error', () => {});
    socket.resume();
    const timer = setTimeout(() => {
      stop();
      socket.destroy();
      reject(new Error(`${name}: still open after ${limitMs} ms`));
    }, limitMs);
    socket.once('close', () => {
      clearTimeout(timer);
      stop();
      resolve(performance.now() - started);
    });
  });
}

/** A listener capped at `connectionsMax`, and where its app answers apart from it. */
export interface CappedListener {
  readonly app: 'gateway' | 'runtime';
  readonly process: AppProcess;
  readonly port: number;
  readonly connectionsMax: number;
  /** Origin of the app's other listener, serving /metrics and /healthz (its probes go there). */
  readonly probeBase: string;
  /** Header lines every request to the capped listener needs (a bearer). */
  readonly headers?: readonly string[];
  /** The connections it holds at the end, for the caller to destroy. */
  readonly held: net.Socket[];
}

/**
 * Fills the listener to its cap on loopback, then checks that one more is
 * closed unread, counted and warned of, the app's probe listener still
 * answers, the held connections are still served, and once one closes a
 * new one is served again.
 */
export async function checkConnectionCap(l: CappedListener): Promise<void> {
  const { app, connectionsMax, held, probeBase } = l;
  const headers = l.headers ?? [];
  const open = (): net.Socket => {
    const socket = connect(l.port, '127.0.0.1');
    socket.on('error', () => {});
    return socket;
  };
  for (let i = 0; i < connectionsMax; i++) {
    const socket = open();
    held.push(socket);
    const answer = await askHealthz(socket, headers);
    assert.match(answer, /^HTTP\/1\.1 200/, `connection ${i + 1} of ${connectionsMax} not served`);
  }
  const refused = open();
  assert.equal(await askHealthz(refused, headers), '', 'a connection past the cap was answered');
  if (!refused.destroyed) await once(refused, 'close');

  assert.equal(await metric(probeBase, `switchyard_${app}_connections_refused_total`), 1);
  assert.equal(await metric(probeBase, `switchyard_${app}_connections_open`), connectionsMax);
  assert.equal(await metric(probeBase, `switchyard_${app}_connections_max`), connectionsMax);
  const warning = await l.process.waitForLog((line) => String(line.msg).startsWith('connection refused'));
  assert.equal(warning.connectionsMax, connectionsMax);
  assert.equal(warning.level, 40, 'logged as a warning');

  // The chart's liveness probe goes to the other listener: a full one must not get the pod restarted.
  const health = await fetch(`${probeBase}/healthz`, { signal: AbortSignal.timeout(5000) });
  assert.equal(health.status, 200, 'no /healthz on the probe listener while the capped one is full');
  await health.text();

  assert.match(await askHealthz(held[0]!, headers), /^HTTP\/1\.1 200/, 'a held connection is no longer served');
  held.shift()!.destroy();
  // The app counts the connection gone once it sees it close; a new one is served then.
  for (let attempt = 0; ; attempt++) {
    const socket = open();
    if (/^HTTP\/1\.1 200/.test(await askHealthz(socket, headers))) {
      held.push(socket);
      break;
    }
    socket.destroy();
    assert.ok(attempt < 50, 'no room again after a held connection closed');
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/**
 * The status of a bare WebSocket upgrade to `url` with `headers` (101 when
 * admitted; the socket of a 101 is closed at once), within 5 s.
 */
export async function upgradeStatus(url: string, headers: http.OutgoingHttpHeaders): Promise<number> {
  const req = http.request(url, {
    agent: false,
    headers: {
      connection: 'Upgrade',
      upgrade: 'websocket',
      'sec-websocket-version': '13',
      'sec-websocket-key': 'dGhlIHNhbXBsZSBub25jZQ==',
      ...headers,
    },
    signal: AbortSignal.timeout(5000),
  });
  req.end();
  const [res, socket] = (await Promise.race([once(req, 'upgrade'), once(req, 'response')])) as [
    http.IncomingMessage,
    net.Socket | undefined,
  ];
  socket?.destroy();
  res.resume();
  return res.statusCode!;
}
