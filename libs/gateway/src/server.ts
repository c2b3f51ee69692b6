// The listener the gateway's handler runs on, as every gateway builds it (the
// gateway app and `switchyard up`): its deadlines, limits and socket options
// are part of how the gateway treats clients, so a local cluster that built
// its own would behave unlike what is deployed.
import type { RequestListener, Server as HttpServer } from 'node:http';
import type { Server as HttpsServer } from 'node:https';
import {
  CONNECTIONS_MAX_DEFAULT,
  LINGER_DEFAULTS,
  SERVER_TIMEOUT_CHECK_INTERVAL_MS,
  WRITE_STALL_TIMEOUT_MS_DEFAULT,
  capConnections,
  closeStalledWrites,
  tcpKeepAliveOptions,
  type Metrics,
  type TlsPair,
} from '@switchyard/service';
import type { Gateway } from './gateway.ts';
import { GATEWAY_DEFAULTS } from './options.ts';

// Not `import http from 'node:http'`: Node builds that ESM namespace by
// reading every export, and three of them (WebSocket, CloseEvent,
// MessageEvent) are getters that load Node's bundled fetch implementation,
// which a gateway never uses: about 2 MB of a gateway holding 10,000 idle
// streams (13 MB in a bare process). getBuiltinModule hands over the module
// object as it is.
const http = process.getBuiltinModule('node:http');

/** The idle timeout announced to clients in `Keep-Alive` (Node's default); see keepAliveTimeoutMs. */
const ANNOUNCED_KEEP_ALIVE_MS = 5_000;

export interface GatewayServerOptions {
  /** What `gateway.app` was given (GatewayOptions.headerBytesMax). Default GATEWAY_DEFAULTS.headerBytesMax. */
  readonly headerBytesMax?: number;
  /** What `gateway.app` was given (GatewayOptions.bodyTimeoutMs). Default GATEWAY_DEFAULTS.bodyTimeoutMs. */
  readonly bodyTimeoutMs?: number;
  /** A request's headers (and a TLS handshake) from its connection's start. Default GATEWAY_DEFAULTS.headersTimeoutMs. */
  readonly headersTimeoutMs?: number;
  /** How long an idle connection is kept in all; clients are told at most 5 s. Default GATEWAY_DEFAULTS.keepAliveTimeoutMs. */
  readonly keepAliveTimeoutMs?: number;
  /** Connections held at once, of every kind (capConnections). Default CONNECTIONS_MAX_DEFAULT. */
  readonly connectionsMax?: number;
  /** Writes waiting this long with no byte taken close the connection (closeStalledWrites). Default WRITE_STALL_TIMEOUT_MS_DEFAULT. */
  readonly writeStallTimeoutMs?: number;
  /** Serve HTTPS (HTTP/1.1 only) with this pair; plain HTTP without. */
  readonly tls?: TlsPair;
  /** The app's metrics: the connection cap's and write stalls' series go there. */
  readonly metrics: Metrics;
  readonly logger: { warn(fields: Record<string, unknown>, message: string): void };
}

/**
 * The HTTP (or, with `tls`, HTTPS) server for `handler`, the gateway's app
 * (with probes, usually), not yet listening. Guarantees, each from its
 * option or default: header blocks up to headerBytesMax reach the gateway
 * (which refuses larger ones itself) and what Node's parser refuses is
 * answered by `gateway.clientError`; a client that has not sent its headers
 * (or finished its TLS handshake) by headersTimeoutMs is cut, and one whose
 * request is not in by headersTimeoutMs + bodyTimeoutMs + a linger (a body
 * the gateway never reads), checked every second; an idle connection is
 * kept keepAliveTimeoutMs while clients are told 5 s; TCP keepalive on every
 * accepted connection; at most connectionsMax connections; and a connection
 * whose writes stall for writeStallTimeoutMs is closed. Not covered: how
 * long an answer takes (an event stream may last hours).
 */
export function createGatewayServer(
  gateway: Pick<Gateway, 'clientError'>,
  handler: RequestListener,
  options: GatewayServerOptions,
): HttpServer | HttpsServer {
  const d = GATEWAY_DEFAULTS;
  const headersTimeoutMs = options.headersTimeoutMs ?? d.headersTimeoutMs;
  const keepAliveTimeoutMs = options.keepAliveTimeoutMs ?? d.keepAliveTimeoutMs;
  // Node's parser refuses a header block past its own limit (16 KiB by default) before the gateway
  // sees it, so a headerBytesMax above that would never be reached: the parser takes as much. (It
  // counts names, values and the request target; the gateway names and values, 4 bytes more a field.)
  // Never less than Node's default: under it the gateway refuses a block itself, with a JSON-RPC body.
  const maxHeaderSize = Math.max(options.headerBytesMax ?? d.headerBytesMax, http.maxHeaderSize);
  // The gateway writes nothing of its own on an idle event stream: TCP keepalive
  // finds a client whose host vanished without closing its connection.
  const accepted = {
    ...tcpKeepAliveOptions(),
    connectionsCheckingInterval: SERVER_TIMEOUT_CHECK_INTERVAL_MS,
    maxHeaderSize,
  };
  // Node's default handshake timeout, 120 s, would let a client that never completes TLS hold its
  // connection four times as long as one that never sends its headers.
  const server = options.tls
    ? // Loaded only when served over TLS: a plain gateway never holds node:https.
      process
        .getBuiltinModule('node:https')
        .createServer(
          { ...options.tls, ALPNProtocols: ['http/1.1'], ...accepted, handshakeTimeout: headersTimeoutMs },
          handler,
        )
    : http.createServer(accepted, handler);
  // What Node's parser refuses (a header block past maxHeaderSize among them) is answered with a JSON-RPC body too.
  server.on('clientError', gateway.clientError);
  // Deadlines on receiving a request, not on answering it: an SSE stream
  // answering a complete request stays open for hours. The gateway answers a
  // POST body still arriving at bodyTimeoutMs with a 408 itself; Node's
  // requestTimeout (checked every second) is the backstop for bodies the gateway
  // never reads (a GET or DELETE sent with one), a linger later.
  server.headersTimeout = headersTimeoutMs;
  server.requestTimeout = headersTimeoutMs + (options.bodyTimeoutMs ?? d.bodyTimeoutMs) + LINGER_DEFAULTS.lingerMs;
  // Clients that read `Keep-Alive` (MCP SDKs on fetch) close an idle
  // connection before the 5 s announced, so the gateway holds no idle socket per
  // session for long. A load balancer in front reads no such header and keeps
  // its own for up to a minute: the socket stays open keepAliveTimeoutMs in
  // all, so the balancer closes first.
  server.keepAliveTimeout = Math.min(keepAliveTimeoutMs, ANNOUNCED_KEEP_ALIVE_MS);
  server.keepAliveTimeoutBuffer = keepAliveTimeoutMs - server.keepAliveTimeout;
  const { metrics, logger } = options;
  // A flood of connections must not take the memory the open event streams live on (see capConnections).
  capConnections(server, { connectionsMax: options.connectionsMax ?? CONNECTIONS_MAX_DEFAULT, metrics, logger });
  // HTTP/1.1 has no ping: a client whose host vanished while a stream writes to it is found once the writes back
  // up, and its stream cancelled upstream, not after the kernel's retransmission timeout.
  const stallTimeoutMs = options.writeStallTimeoutMs ?? WRITE_STALL_TIMEOUT_MS_DEFAULT;
  closeStalledWrites(server, { stallTimeoutMs, metrics, logger });
  return server;
}
