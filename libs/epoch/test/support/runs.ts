// What the tests of runs of parts over real WebSockets share: a fleet large enough to go in many parts, its
// snapshot commit, and a socket pair whose reader is paused, as a slow follower's.
import type { AddressInfo } from 'node:net';
import { WebSocket, WebSocketServer } from 'ws';
import type { RuntimeState, SyncMessage } from '@switchyard/protocol';
import { runtimeState } from './cluster.ts';

/** `count` runtimes of 4,000 sessions each: some 220 KB of JSON a runtime. */
export const fleet = (count: number, owner = 'leader'): RuntimeState[] =>
  Array.from({ length: count }, (_, r) =>
    runtimeState(
      `${owner}-r${r}`,
      owner,
      Array.from({ length: 4000 }, (_, i) => `proc-${i % 40}/session-${String(i).padStart(8, '0')}`),
    ),
  );

export const snapshotCommit = (epoch: number, runtimes: RuntimeState[]): SyncMessage => ({
  type: 'commit',
  term: 1,
  epoch,
  body: { kind: 'snapshot', snapshot: { epoch, term: 1, runtimes } },
});

/**
 * A server socket and a client socket on loopback, the client paused before it reads anything; their closing
 * goes into `closers`.
 */
export async function pausedSocketPair(
  closers: Array<() => unknown>,
): Promise<{ server: WebSocket; client: WebSocket }> {
  const wss = new WebSocketServer({ port: 0, host: '127.0.0.1', perMessageDeflate: false });
  closers.push(() => {
    for (const ws of wss.clients) ws.terminate();
    return new Promise((resolve) => wss.close(resolve));
  });
  await new Promise((resolve) => wss.once('listening', resolve));
  const accepted = new Promise<WebSocket>((resolve) => wss.once('connection', resolve));
  const client = new WebSocket(`ws://127.0.0.1:${(wss.address() as AddressInfo).port}`, { perMessageDeflate: false });
  closers.push(() => client.terminate());
  await new Promise((resolve, reject) => client.once('open', resolve).once('error', reject));
  client.pause();
  return { server: await accepted, client };
}
