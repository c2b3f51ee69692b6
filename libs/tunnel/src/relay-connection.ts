import type { EventEmitter } from 'node:events';
import http from 'node:http';
import http2 from 'node:http2';
import type { Duplex } from 'node:stream';
import { FORWARDED_HEADER_BYTES_MAX, PROXY_ERRORS, RELAY } from '@switchyard/protocol';
import { writeRefusal } from './admission.ts';
import { TUNNEL_DEFAULTS } from './defaults.ts';
import { failureOf, openFailureOf, refusalOf } from './proxy.ts';
import type { Tunnel } from './tunnel.ts';

/**
 * Relay connections: a gateway's HTTP/1.1 connection carried whole through a
 * runtime's tunnel, as one long-lived HTTP/2 CONNECT stream that the runtime
 * serves with an HTTP/1.1 server of its own (see protocol.md §2 and §7).
 *
 * `/api/proxy` costs the scheduler an HTTP/1.1 request in and an HTTP/2
 * stream out for every request, and the runtime a new stream with its
 * compatibility objects. On a relay connection the scheduler only copies
 * bytes, and the stream outlives the request like a keep-alive connection.
 * Measured side by side on loopback (a stand-in runtime answering an echo
 * call), a request cost the scheduler 77 against 282 µs of CPU, the
 * runtime 100 against 174, and the round trip 0.21 against 0.36 ms.
 */

const SWITCHED = `HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: ${RELAY.upgrade}\r\n\r\n`;

/**
 * The scheduler's side: answers `GET /api/relay/<runtime>` with
 * `Upgrade: switchyard-relay`. Once the runtime has accepted the CONNECT
 * stream the gateway gets `101` and the socket and the stream are piped both
 * ways; either end closing closes the other (a gateway's close resets the
 * stream with CANCEL, which the runtime sees as its client leaving).
 * Refusals are plain HTTP answers with a JSON body, and no byte of a request
 * has crossed by then: 502 `runtime not connected` (no tunnel here, or it
 * died) or `runtime stream failed`, 503 `runtime stream limit reached`
 * (see `refusalOf`), 501 when the runtime does not serve relay connections
 * (an older release: its HTTP/2 server answers CONNECT with 405).
 */
export function relayConnection(tunnel: Tunnel | undefined, socket: Duplex, head: Buffer, runtimeId: string): void {
  socket.on('error', () => {});
  let state: 'opening' | 'refused' | 'piped' = 'opening';
  /** Refuses with `error`'s status (see refusalOf), or with `status` when given. */
  const refuse = (error: string, status?: 501): void => {
    if (state !== 'opening' || socket.destroyed) return;
    state = 'refused';
    const refusal = refusalOf(error);
    writeRefusal(socket, {
      status: status ?? refusal.status,
      body: { error, runtime: runtimeId },
      headers: refusal.headers,
    });
  };
  if (!tunnel?.usable) return refuse(PROXY_ERRORS.notConnected);
  let stream: http2.ClientHttp2Stream;
  try {
    stream = tunnel.openConnection();
  } catch (error) {
    return refuse(openFailureOf(tunnel, error));
  }
  stream.on('error', () => {});
  socket.once('close', () => {
    if (!stream.destroyed) stream.close(http2.constants.NGHTTP2_CANCEL);
  });
  stream.once('response', (headers) => {
    if (headers[':status'] !== 200) {
      refuse('the runtime does not accept relay connections', 501);
      return void stream.close(http2.constants.NGHTTP2_CANCEL);
    }
    if (state !== 'opening' || socket.destroyed) return;
    state = 'piped';
    socket.write(SWITCHED);
    if (head.length > 0) stream.write(head);
    socket.pipe(stream);
    stream.pipe(socket);
  });
  stream.once('close', () => {
    if (state === 'opening') return refuse(failureOf(tunnel));
    // An end (the runtime closed its connection) reached the gateway through the pipe; a reset ends it here.
    if (stream.rstCode !== http2.constants.NGHTTP2_NO_ERROR || !stream.readableEnded) socket.destroy();
  });
}

/** The runtime's relay connections, as its dialer holds them. */
export interface RelayServer {
  /**
   * The runtime is going away: idle relay connections close now, busy ones
   * once their last answer is out (it says `Connection: close` when its head
   * is still to be written). A gateway then dials a new relay, which the
   * scheduler refuses once the tunnel is gone, instead of sending requests
   * into the tunnel's last second of grace.
   */
  drain(): void;
  /**
   * The tunnel is gone for good (its dialer closed), and every relay with
   * it: stops the deadline checks, whose timer would otherwise run, and
   * hold this server and the runtime's handler, for the rest of the
   * process. Idempotent.
   */
  close(): void;
}

/** Deadlines on receiving a request on a relay connection; see TUNNEL_DEFAULTS.relayHeadersTimeoutMs. */
export interface RelayLimits {
  /** From the relay's start, or a request's first byte, to the end of the request's headers. */
  readonly headersTimeoutMs: number;
  /** From a request's first byte to the end of its body. */
  readonly requestTimeoutMs: number;
  /** How often the deadlines are checked (so they are met within this much). */
  readonly checkIntervalMs: number;
}

const RELAY_LIMITS: RelayLimits = {
  headersTimeoutMs: TUNNEL_DEFAULTS.relayHeadersTimeoutMs,
  requestTimeoutMs: TUNNEL_DEFAULTS.relayRequestTimeoutMs,
  checkIntervalMs: TUNNEL_DEFAULTS.relayCheckIntervalMs,
};

/**
 * The runtime's side: every CONNECT stream `server` (the tunnel's HTTP/2
 * server) receives becomes a connection of an HTTP/1.1 server that serves
 * `handler`, the same handler as tunnel streams. Idle relay connections
 * close after TUNNEL_DEFAULTS.relayKeepAliveMs, announced in `Keep-Alive`,
 * so gateways drop them first; one that sends no request, or does not
 * finish one, within `limits` is cut.
 */
export function serveRelayConnections(
  server: EventEmitter,
  handler: http.RequestListener,
  limits: RelayLimits = RELAY_LIMITS,
): RelayServer {
  /** Each open relay stream, with the number of its requests not yet answered. */
  const busy = new Map<http2.ServerHttp2Stream, number>();
  /** Responses not yet over: those whose head is still to be written say `Connection: close` once draining. */
  const answering = new Set<http.ServerResponse>();
  let draining = false;
  const connections = http.createServer(
    {
      // Node's 16 KiB would refuse, with a bare 431, headers the gateway forwards and the tunnel carried.
      maxHeaderSize: FORWARDED_HEADER_BYTES_MAX,
      headersTimeout: limits.headersTimeoutMs,
      requestTimeout: limits.requestTimeoutMs,
      connectionsCheckingInterval: limits.checkIntervalMs,
    },
    (req, res) => {
      const stream = req.socket as unknown as http2.ServerHttp2Stream;
      busy.set(stream, (busy.get(stream) ?? 0) + 1);
      if (draining) res.shouldKeepAlive = false;
      answering.add(res);
      res.once('close', () => {
        answering.delete(res);
        const left = (busy.get(stream) ?? 1) - 1;
        if (busy.has(stream)) busy.set(stream, left);
        if (draining && left === 0) stream.end();
      });
      handler(req, res);
    },
  );
  connections.keepAliveTimeout = TUNNEL_DEFAULTS.relayKeepAliveMs;
  // Node checks headersTimeout and requestTimeout from when a server emits 'listening' (its connection
  // checks start then). This one never listens, its connections are CONNECT streams: without this, a relay
  // opened and abandoned, or trickling a request, held its tunnel stream for ever. (The check's timer is
  // unref'd; close() stops it, as Node's close() does for a server that listened.)
  connections.emit('listening');
  let closed = false;
  server.on('connect', (_req: http2.Http2ServerRequest, res: http2.Http2ServerResponse) => {
    const stream = res.stream;
    stream.on('error', () => {});
    if (draining) return void stream.close(http2.constants.NGHTTP2_REFUSED_STREAM);
    // Node's HTTP/1.1 server writes a head without a body (a 202, a 204) as
    // a string, and an HTTP/2 stream sends strings from memory that is gone
    // by the time the frame leaves (Node 24: the head arrived garbled). A
    // stream that turns strings into buffers first, as sockets do, sends them intact.
    (stream as unknown as { _writableState: { decodeStrings: boolean } })._writableState.decodeStrings = true;
    stream.respond({ ':status': 200 });
    busy.set(stream, 0);
    stream.once('close', () => busy.delete(stream));
    connections.emit('connection', stream);
  });
  return {
    drain() {
      draining = true;
      for (const res of answering) if (!res.headersSent) res.shouldKeepAlive = false;
      for (const [stream, requests] of busy) if (requests === 0) stream.end();
    },
    close() {
      if (closed) return;
      closed = true;
      // Never listening, it has no handle to close: this clears the checks' timer (and closes idle relays, none by now).
      connections.close();
    },
  };
}
