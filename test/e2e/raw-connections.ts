// Raw client connections for the tests of listener limits and deadlines:
// one that asks a listener for /healthz on a kept-alive socket, one that
// trickles a header block, and a timer of how long a listener holds one.
import type net from 'node:net';
import { connect } from 'node:net';

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
