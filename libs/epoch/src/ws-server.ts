import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import { WebSocket, WebSocketServer } from 'ws';
import { SYNC_FEATURES, SYNC_FEATURES_HEADER, SwitchyardError, isIdentityValue } from '@switchyard/protocol';
import { WS_SYNC_DEFAULTS, wsSyncConnection } from './ws-connection.ts';
import type { SyncConnection } from './types.ts';

/**
 * Largest inbound frame by default. Between replicas that list `SYNC_FEATURES.parts`, a snapshot or full part
 * above a part (4 MiB, or this limit if smaller) goes in parts, so it bounds a frame, not the state; to a peer
 * of an earlier release one goes whole, and must fit (tens of thousands of runtimes, at about a KiB each).
 * Replicas of one cluster must share the limit they are given instead.
 */
export const SYNC_PAYLOAD_BYTES_MAX = 64 * 1024 * 1024;

const SYNC_PATH = /^\/api\/sync\/([^/]+)$/;

/** The reason of the 1008 that closes a peer `watch` no longer admits: its follower tries another token first. */
export const CLOSE_REASON_WITHDRAWN = 'credentials withdrawn';

export interface SyncServerOptions {
  /** A follower connected to `GET /api/sync/:replica`; typically `leader.attach(conn, replica)`. */
  readonly onConnection: (conn: SyncConnection, replica: string) => void;
  readonly bufferedBytesMax?: number;
  /** Largest frame taken from a follower, and assumed of followers. Default `SYNC_PAYLOAD_BYTES_MAX`. */
  readonly payloadBytesMax?: number;
  /** Largest run of parts taken from a follower, its frames together. Default `WS_SYNC_DEFAULTS.runBytesMax`. */
  readonly runBytesMax?: number;
  /** A frame of `bytes` above `payloadBytesMax` went to `replica`, which refuses it if it shares the limit. */
  readonly onLargeFrame?: (replica: string, bytes: number, payloadBytesMax: number) => void;
  /**
   * The leader closed `replica`'s connection on what it sent (see `WsSyncConnectionOptions.onRefuse`): 1008 for a
   * malformed message or a run of parts out of order or above `runBytesMax`, 1009 for a frame above
   * `payloadBytesMax`. The follower redials and sends it again, so it repeats until fixed.
   */
  readonly onRefused?: (replica: string, code: number, reason: string) => void;
  /**
   * Admits a peer before the upgrade (e.g. checks its bearer token); a
   * refused peer is answered 401 and never reaches `onConnection`. Default:
   * every peer is admitted — only for a network no one else can reach.
   */
  readonly authorize?: (req: IncomingMessage) => boolean;
  /**
   * Watches an admitted peer: called with its upgrade request and a function
   * that closes its connection (1008), e.g. once the token it presented is
   * removed; returns the release to call when the connection closes first.
   */
  readonly watch?: (req: IncomingMessage, close: () => void) => () => void;
}

export interface SyncServer {
  /**
   * Takes an HTTP upgrade if its path is `/api/sync/:replica` and returns
   * true; returns false, touching nothing, for any other path. A bad
   * replica id is answered 400 and the socket closed.
   */
  handleUpgrade(req: IncomingMessage, socket: Duplex, head: Buffer): boolean;
  /** Closes every sync connection (1001) and stops accepting. Idempotent. */
  close(): void;
}

/** The leader side of `/api/sync/:replica`, to be wired to an HTTP server's `upgrade` event. No authentication. */
export function createSyncServer(options: SyncServerOptions): SyncServer {
  const payloadBytesMax = options.payloadBytesMax ?? SYNC_PAYLOAD_BYTES_MAX;
  const wss = new WebSocketServer({ noServer: true, perMessageDeflate: false, maxPayload: payloadBytesMax });
  const bufferedBytesMax = options.bufferedBytesMax ?? WS_SYNC_DEFAULTS.bufferedBytesMax;
  // Followers send the optional fields a leader lists here, and leave them out for one that lists none.
  const features = [
    SYNC_FEATURES.latestEpoch,
    SYNC_FEATURES.tokenFingerprint,
    SYNC_FEATURES.instance,
    SYNC_FEATURES.parts,
  ].join(', ');
  wss.on('headers', (headers) => headers.push(`${SYNC_FEATURES_HEADER}: ${features}`));
  let closed = false;
  return {
    handleUpgrade(req, socket, head) {
      let pathname: string;
      try {
        pathname = new URL(req.url ?? '/', 'http://localhost').pathname;
      } catch {
        return false; // a request target no URL parser takes (`//[`) is no sync path; thrown here, it crashed the process
      }
      const match = SYNC_PATH.exec(pathname);
      if (!match) return false;
      let replica = '';
      try {
        replica = decodeURIComponent(match[1]!);
      } catch {
        // falls through to the 400 below
      }
      if (closed || !isIdentityValue(replica)) {
        const status = closed ? '503 Service Unavailable' : '400 Bad Request';
        socket.end(`HTTP/1.1 ${status}\r\nConnection: close\r\nContent-Length: 0\r\n\r\n`);
        return true;
      }
      if (options.authorize && !options.authorize(req)) {
        socket.end('HTTP/1.1 401 Unauthorized\r\nConnection: close\r\nContent-Length: 0\r\n\r\n');
        return true;
      }
      wss.handleUpgrade(req, socket, head, (ws) => {
        const release = options.watch?.(req, () => ws.close(1008, CLOSE_REASON_WITHDRAWN));
        if (release) ws.once('close', release);
        const { onLargeFrame, onRefused } = options;
        // A follower of an earlier release lists no features, and would close on a field or frame it does not know.
        const listed = listedFeatures(req.headers[SYNC_FEATURES_HEADER]);
        const conn = wsSyncConnection(ws, {
          bufferedBytesMax,
          payloadBytesMax,
          ...(options.runBytesMax === undefined ? {} : { runBytesMax: options.runBytesMax }),
          peerReadsTokenFingerprint: listed.includes(SYNC_FEATURES.tokenFingerprint),
          peerReadsInstance: listed.includes(SYNC_FEATURES.instance),
          peerReadsParts: listed.includes(SYNC_FEATURES.parts),
          ...(onLargeFrame ? { onLargeFrame: (bytes, max) => onLargeFrame(replica, bytes, max) } : {}),
          ...(onRefused ? { onRefuse: (code, reason) => onRefused(replica, code, reason) } : {}),
        });
        options.onConnection(conn, replica);
      });
      return true;
    },
    close() {
      if (closed) return;
      closed = true;
      for (const ws of wss.clients) ws.close(1001, 'server closing');
      wss.close();
    },
  };
}

export interface ConnectSyncOptions {
  readonly bufferedBytesMax?: number;
  /** Largest frame taken from the leader; one above it closes the connection as 1009. Default `SYNC_PAYLOAD_BYTES_MAX`. */
  readonly payloadBytesMax?: number;
  /** Largest run of parts taken from the leader, its frames together. Default `WS_SYNC_DEFAULTS.runBytesMax`. */
  readonly runBytesMax?: number;
  /** Default 10 s. */
  readonly handshakeTimeoutMs?: number;
  /** Sent with the upgrade request, e.g. `Authorization: Bearer <token>`. */
  readonly headers?: Readonly<Record<string, string>>;
}

/**
 * Opens the follower side: `baseUrl` is the leader's `http(s)://` or
 * `ws(s)://` origin (with an optional path prefix). Rejects with an
 * `upstream_unavailable` SwitchyardError when the handshake fails.
 */
export function connectSync(
  baseUrl: string,
  replica: string,
  options: ConnectSyncOptions = {},
): Promise<SyncConnection> {
  if (!isIdentityValue(replica)) {
    return Promise.reject(new SwitchyardError('bad_identity', `replica id ${JSON.stringify(replica)} is not valid`));
  }
  const url = new URL(baseUrl);
  url.protocol = url.protocol.replace(/^http/, 'ws');
  url.pathname = `${url.pathname.replace(/\/$/, '')}/api/sync/${replica}`;
  const payloadBytesMax = options.payloadBytesMax ?? SYNC_PAYLOAD_BYTES_MAX;
  const ws = new WebSocket(url, {
    perMessageDeflate: false,
    maxPayload: payloadBytesMax,
    handshakeTimeout: options.handshakeTimeoutMs ?? 10_000,
    // What this follower reads, for the leader to leave out what it would not.
    headers: {
      ...options.headers,
      [SYNC_FEATURES_HEADER]: [SYNC_FEATURES.tokenFingerprint, SYNC_FEATURES.instance, SYNC_FEATURES.parts].join(', '),
    },
  });
  return new Promise((resolve, reject) => {
    let settled = false;
    const fail = (detail: string, cause?: unknown): void => {
      if (settled) return;
      settled = true;
      ws.terminate();
      reject(
        new SwitchyardError('upstream_unavailable', `sync connection to ${url.origin} failed: ${detail}`, { cause }),
      );
    };
    // Kept after a failure: terminate() during the handshake emits one more 'error'.
    ws.on('error', (error) => fail(error.message, error));
    ws.on('unexpected-response', (_req, res) => fail(`HTTP ${res.statusCode}`));
    let features: string[] = [];
    ws.once('upgrade', (res) => (features = listedFeatures(res.headers[SYNC_FEATURES_HEADER])));
    ws.once('open', () => {
      settled = true;
      ws.removeAllListeners('error');
      ws.removeAllListeners('unexpected-response');
      const peerReadsLatestEpoch = features.includes(SYNC_FEATURES.latestEpoch);
      const peerReadsTokenFingerprint = features.includes(SYNC_FEATURES.tokenFingerprint);
      const peerReadsInstance = features.includes(SYNC_FEATURES.instance);
      const peerReadsParts = features.includes(SYNC_FEATURES.parts);
      resolve(
        wsSyncConnection(ws, {
          ...options,
          payloadBytesMax,
          peerReadsLatestEpoch,
          peerReadsTokenFingerprint,
          peerReadsInstance,
          peerReadsParts,
        }),
      );
    });
  });
}

/** The features a `SYNC_FEATURES_HEADER` value lists (none for a peer of an earlier release, which sends none). */
function listedFeatures(header: string | string[] | undefined): string[] {
  return String(header ?? '')
    .split(',')
    .map((f) => f.trim());
}
