import type http2 from 'node:http2';
import type { Duplex } from 'node:stream';
import type WebSocket from 'ws';
import { byteStream, probe } from './wire.ts';

/**
 * How a tunnel's HTTP/2 travels after the connect handshake:
 * - `http2`: straight on the upgraded connection (`Upgrade: switchyard-tunnel`).
 *   Node's HTTP/2 then reads and writes the socket natively; measured here it
 *   carries one stream at about three times the rate of `websocket` and saves
 *   about 0.07 ms per round trip.
 * - `websocket`: in binary WebSocket messages (`Upgrade: websocket`), for
 *   proxies that pass WebSocket upgrades only.
 */
export type CarrierTransport = 'http2' | 'websocket';

/**
 * What a runtime asks for: one transport, or `auto` (`http2`, falling back to
 * `websocket` when it is refused, or for a while when it is taken but carries
 * nothing; see `AutoTransport`).
 */
export type TunnelTransport = CarrierTransport | 'auto';

/** The `Upgrade` token of the `http2` transport. */
export const TUNNEL_UPGRADE = 'switchyard-tunnel';

/** The connection a tunnel's HTTP/2 session runs on, once the handshake is done. */
export interface Carrier {
  readonly transport: CarrierTransport;
  /** The byte stream HTTP/2 runs on. */
  readonly stream: Duplex;
  /** One liveness round; resolves with the HTTP/2 ping round trip in ms (see `probe`). */
  probe(session: http2.Http2Session): Promise<number>;
  /** Drops the connection at once. Idempotent. */
  destroy(): void;
  /** Calls `listener` once, with why, when the connection closes or fails. */
  onEnd(listener: (reason: string) => void): void;
}

/** HTTP/2 in WebSocket binary messages. Liveness probes both layers: a middlebox may idle out the WebSocket. */
export function webSocketCarrier(ws: WebSocket): Carrier {
  const stream = byteStream(ws);
  // Errors also close the socket, which onEnd reports; one with no listener would crash the process.
  ws.on('error', () => {});
  return {
    transport: 'websocket',
    stream,
    probe: (session) => probe(session, ws),
    destroy: () => ws.terminate(),
    onEnd(listener) {
      const end = once(listener);
      ws.once('close', (code) => end(`websocket closed (${code})`));
      // A protocol error leaves the socket in a closing handshake for a while; the carrier is unusable now.
      ws.once('error', (error) => end(`websocket error: ${error.message}`));
      stream.once('close', () => end('byte stream closed'));
    },
  };
}

/** HTTP/2 straight on an upgraded connection. HTTP/2 PING is the only liveness round (and keeps it busy). */
export function socketCarrier(socket: Duplex): Carrier {
  // Errors also close the socket, which onEnd reports; one with no listener would crash the process.
  socket.on('error', () => {});
  return {
    transport: 'http2',
    stream: socket,
    probe: (session) => probe(session),
    destroy: () => void socket.destroy(),
    onEnd(listener) {
      const end = once(listener);
      socket.once('close', () => end('connection closed'));
      // The scheduler's sockets are half-open capable (HTTP servers allow it), and an HTTP/2 session that has
      // not finished its handshake does not act on the peer's FIN: without this, a runtime gone before its
      // first SETTINGS would hold the tunnel until the ping timeout. HTTP/2 has no half-close: a FIN means gone.
      socket.once('end', () => end('connection closed by the peer'));
      socket.once('error', (error: Error) => end(`connection error: ${error.message}`));
    },
  };
}

function once(listener: (reason: string) => void): (reason: string) => void {
  let called = false;
  return (reason) => {
    if (called) return;
    called = true;
    listener(reason);
  };
}
