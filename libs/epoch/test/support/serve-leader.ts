import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { systemClock } from '@switchyard/clock';
import { EpochLeader, createSyncServer, type SyncServerOptions } from '@switchyard/epoch';
import { referenceApply, referenceDiff, referenceMerge } from '@switchyard/epoch/testing';
import type { RuntimeState } from '@switchyard/protocol';

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

/**
 * A leader (replica `leader`, term 1, the reference merge, diff and apply, a 50 ms cycle) whose own part is
 * `localPart`, served as `serveLeader` serves one; resolves with its base URL.
 */
export function serveReferenceLeader(localPart: () => RuntimeState[], closers: Array<() => unknown>): Promise<string> {
  const leader = new EpochLeader({
    replicaId: 'leader',
    term: 1,
    clock: systemClock,
    localPart,
    merge: referenceMerge,
    diff: referenceDiff,
    apply: referenceApply,
    cycleIntervalMs: 50,
    debounceMs: 5,
  });
  return serveLeader(leader, closers);
}
