import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createSyncServer, type EpochLeader, type SyncServerOptions } from '@switchyard/epoch';

/**
 * Serves `leader`'s sync endpoint on 127.0.0.1 (every other request a 404);
 * resolves with its base URL. Pushes onto `closers` what stops it, in order.
 * `options` go to the sync server (e.g. a small `payloadBytesMax`).
 */
export async function serveLeader(
  leader: EpochLeader,
  closers: Array<() => unknown>,
  options: Omit<SyncServerOptions, 'onConnection'> = {},
): Promise<string> {
  const sync = createSyncServer({ ...options, onConnection: (conn, replica) => leader.attach(conn, replica) });
  const http = createServer((_req, res) => res.writeHead(404).end());
  http.on('upgrade', (req, socket, head) => void sync.handleUpgrade(req, socket, head));
  await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', resolve));
  closers.push(
    () => new Promise((resolve) => http.close(resolve)),
    () => sync.close(),
    () => leader.stop(),
  );
  return `http://127.0.0.1:${(http.address() as AddressInfo).port}`;
}
