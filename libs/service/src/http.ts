import type { AddressInfo, Socket } from 'node:net';
import type { IncomingMessage, Server, ServerOptions } from 'node:http';
import { systemClock } from '@switchyard/clock';
import type { Clock } from '@switchyard/clock';
import { urlHost } from './url-host.ts';

/** What an operator reads when a port cannot be bound, by the system's error code. */
const LISTEN_REASONS: Readonly<Record<string, string>> = {
  EADDRINUSE: 'the port is already in use',
  EACCES: 'permission denied (ports below 1024 need privileges)',
  EADDRNOTAVAIL: 'the address is not one of this machine',
};

/**
 * A listener that could not be bound: says which address (an IPv6 one in
 * brackets, as `[::1]:7070`, not `::1:7070`) and why in its message; `code`
 * stays the system's (`EADDRINUSE`, …), the original error is the `cause`.
 */
export class ListenError extends Error {
  readonly code: string | undefined;
  readonly host: string;
  readonly port: number;
  constructor(host: string, port: number, cause: NodeJS.ErrnoException) {
    const reason = (cause.code && LISTEN_REASONS[cause.code]) ?? cause.message;
    super(`cannot listen on ${urlHost(host)}:${port}: ${reason}`, { cause });
    this.name = 'ListenError';
    this.code = cause.code;
    this.host = host;
    this.port = port;
  }
}

/**
 * Connections the kernel holds for a listener before it accepts them. Node's
 * default, 511, overflows when thousands of clients connect at once (agents
 * starting together, every client of a restarted gateway, a gateway opening
 * `/api/proxy` connections for a burst of calls): the kernel then drops their
 * handshakes or answers with SYN cookies, and resets connections whose cookie
 * expired before there was room, so requests that were sent are never read.
 * The kernel caps it at `net.core.somaxconn` (4096 by default since Linux 5.4).
 */
export const LISTEN_BACKLOG = 4096;

/**
 * How long the servers gateways call (a scheduler's API, a runtime's direct
 * listener) keep an idle connection, announced in `Keep-Alive`. Far longer
 * than a gateway keeps one (4 s): a caller that sends on a connection the
 * server is closing gets it cut with its request, and cannot tell whether
 * the request was read, so it must answer 502 rather than retry. With
 * Node's 5 s, a gateway's event loop stalled for two seconds under load was
 * enough for that.
 */
export const SERVER_KEEP_ALIVE_MS = 65_000;

/**
 * How long an accepted connection may go without a byte before the kernel
 * probes its peer (TCP keepalive; Node's libuv then probes every second, ten
 * times). A peer whose host vanished without a FIN or RST (powered off, cut
 * off by a NAT) on a connection that carries nothing (an event stream silent
 * for hours, an HTTP/2 connection whose streams are) is otherwise only found
 * when a write to it fails: the connection, and what it holds (a stream
 * upstream), stay open until then. With this, it is closed about 70 s after
 * its last traffic; a peer that is there (a load balancer included) answers
 * the probes in the kernel, unseen by the app. Not sooner on a connection
 * the server writes to: the kernel sends no probe while data it sent waits
 * for an acknowledgement, and gives that up after its retransmission timeout
 * (about 15 min with Linux defaults).
 */
export const SERVER_TCP_KEEP_ALIVE_DELAY_MS = 60_000;

/**
 * Options for `http.createServer` and `https.createServer` that turn TCP
 * keepalive on for every connection the server accepts, probing after
 * SERVER_TCP_KEEP_ALIVE_DELAY_MS idle. Set at accept, before any protocol
 * sees the socket: connections routed to HTTP/2 (serveH2c) or handed to an
 * `upgrade` handler keep it.
 */
export function tcpKeepAliveOptions(): Pick<ServerOptions, 'keepAlive' | 'keepAliveInitialDelay'> {
  return { keepAlive: true, keepAliveInitialDelay: SERVER_TCP_KEEP_ALIVE_DELAY_MS };
}

/**
 * How often a server checks its `headersTimeout` and `requestTimeout`
 * (Node's `connectionsCheckingInterval`): a connection is closed at the
 * first check past its deadline. Node's default, 30 s, let a client
 * trickling its headers hold a connection up to 30 s past the deadline (40 s
 * for a scheduler's 10 s, 60 s for a gateway's 30 s). The check walks only
 * connections with a request still arriving, not idle or streaming ones.
 */
export const SERVER_TIMEOUT_CHECK_INTERVAL_MS = 1_000;

/**
 * How long a client of an in-cluster listener may take to send its request's
 * headers: its clients (kubelet probes, Prometheus, gateways) send them at
 * once. Node's default, 60 s checked every 30 s, let anyone who reaches the
 * port hold a connection 90 s with a byte every few seconds, or none.
 */
export const INTERNAL_HEADERS_TIMEOUT_MS = 10_000;

export interface RequestDeadlines {
  /** Headers, from the connection's start. Default INTERNAL_HEADERS_TIMEOUT_MS. */
  readonly headersTimeoutMs?: number;
  /** The whole request, body included; not the answer (an event stream may last hours). Default Node's, 300 s. */
  readonly requestTimeoutMs?: number;
}

/**
 * Options for `http.createServer` holding its clients to deadlines on
 * sending their requests, checked every SERVER_TIMEOUT_CHECK_INTERVAL_MS: a
 * connection past one is closed (408 if a request had begun).
 */
export function deadlineOptions(deadlines: RequestDeadlines = {}): ServerOptions {
  return {
    headersTimeout: deadlines.headersTimeoutMs ?? INTERNAL_HEADERS_TIMEOUT_MS,
    ...(deadlines.requestTimeoutMs === undefined ? {} : { requestTimeout: deadlines.requestTimeoutMs }),
    connectionsCheckingInterval: SERVER_TIMEOUT_CHECK_INTERVAL_MS,
  };
}

/**
 * Binds `server` with a backlog of LISTEN_BACKLOG and resolves with the bound
 * address (port 0 picks a free port); rejects with a ListenError. Watches
 * the connections it accepts until their first request, so that
 * `closeServer` can close those that never sent a byte.
 */
export function listen(server: Server, options: { host: string; port: number }): Promise<AddressInfo> {
  watchFirstRequests(server);
  return new Promise((resolve, reject) => {
    const onError = (error: Error): void => reject(new ListenError(options.host, options.port, error));
    server.once('error', onError);
    server.listen({ port: options.port, host: options.host, backlog: LISTEN_BACKLOG }, () => {
      server.off('error', onError);
      resolve(server.address() as AddressInfo);
    });
  });
}

/**
 * For an app's entry point: a ListenError (also from a lib that binds
 * listeners, e.g. a scheduler replica) is written to stderr as one line,
 * `<program>: cannot listen on <host>:<port>: <reason>`, without a stack,
 * and the process exits 1. Other errors are rethrown.
 */
export function exitOnListenError(program: string, error: unknown): never {
  if (!(error instanceof ListenError)) throw error;
  process.stderr.write(`${program}: ${error.message}\n`);
  process.exit(1);
}

export interface CloseServerOptions {
  /** How long in-flight requests may run before their connections are cut. */
  readonly timeoutMs: number;
  /** Default: the system clock. */
  readonly clock?: Clock;
}

export interface CloseResult {
  /** True when connections were still open at the deadline and were cut. */
  readonly forced: boolean;
}

/** Per server `listen` bound: its connections that have not begun a request yet. */
const beforeFirstRequest = new WeakMap<Server, Set<Socket>>();

/**
 * Keeps in a set each connection `server` hands to HTTP/1.1 until it begins
 * its first request (or closes). One listener per server, shared by every
 * socket, and the set holds none of the long-lived connections (event
 * streams have begun theirs): nothing per idle stream.
 */
function watchFirstRequests(server: Server): void {
  if (beforeFirstRequest.has(server)) return;
  const waiting = new Set<Socket>();
  beforeFirstRequest.set(server, waiting);
  function begun(this: Socket): void {
    waiting.delete(this);
    this.off('close', begun);
  }
  // An HTTPS server hands HTTP/1.1 the decrypted connection, once the handshake is done.
  server.on('addContext' in server ? 'secureConnection' : 'connection', (socket: Socket) => {
    waiting.add(socket);
    socket.on('close', begun);
  });
  server.on('request', (req: IncomingMessage) => begun.call(req.socket));
}

/**
 * Closes the connections that have sent no byte since the last sweep (the
 * first sweep marks them: a request on its way when the server stops is
 * not cut). Node's `server.close()` stops the check of `headersTimeout`, and
 * `closeIdleConnections()` does not take a connection without a request for
 * idle, so each would hold the close until its deadline. Connections with a
 * request begun (its headers still arriving, say) or upgraded (which sent
 * one) are left alone.
 */
function closeSilentConnections(server: Server, silentBefore: WeakSet<Socket>): void {
  for (const socket of beforeFirstRequest.get(server) ?? []) {
    if (socket.bytesRead > 0) continue;
    if (silentBefore.has(socket)) socket.destroy();
    else silentBefore.add(socket);
  }
}

/**
 * Idle sockets re-checked this often, so keep-alive connections leave as soon as their last response ends,
 * and silent ones one to two sweeps after the close.
 */
const IDLE_SWEEP_MS = 50;
const closing = new WeakMap<Server, Promise<CloseResult>>();

/**
 * Stops accepting, closes idle keep-alive connections and (on a server
 * bound by `listen`) those that have sent nothing, lets in-flight requests
 * finish, and at `timeoutMs` cuts whatever is left (a hung SSE stream, say).
 * Idempotent: a second call returns the first call's promise.
 * Not covered: sockets taken over by an `upgrade` handler (WebSockets) are
 * no longer the server's; close those in a shutdown hook. A TLS handshake
 * still under way ends at the server's `handshakeTimeout`.
 */
export function closeServer(server: Server, options: CloseServerOptions): Promise<CloseResult> {
  const existing = closing.get(server);
  if (existing) return existing;
  const clock = options.clock ?? systemClock;
  const done = new Promise<CloseResult>((resolve) => {
    let forced = false;
    const silent = new WeakSet<Socket>();
    const sweep = setInterval(() => {
      server.closeIdleConnections();
      closeSilentConnections(server, silent);
    }, IDLE_SWEEP_MS);
    sweep.unref();
    const deadline = clock.setTimeout(() => {
      forced = true;
      server.closeAllConnections();
    }, options.timeoutMs);
    // An error here only means "was not listening"; the server is closed either way.
    server.close(() => {
      deadline.cancel();
      clearInterval(sweep);
      resolve({ forced });
    });
    server.closeIdleConnections();
    closeSilentConnections(server, silent);
  });
  closing.set(server, done);
  return done;
}
