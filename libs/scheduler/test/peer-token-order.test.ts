// A follower whose sync connection closes redials presenting first the peer
// token its leader took last. During a join token rotation a replica may list
// a token the leader does not take yet; presenting the next token of the list
// instead cost one refused attempt, and a warning, at every reconnect. Real
// replicas on loopback; the follower reaches the leader through a TCP front,
// so that the test can cut their sync connection as a network in between would.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { once } from 'node:events';
import net from 'node:net';
import { MemoryLeaseStore } from '@switchyard/election';
import type { SchedulerReplica } from '@switchyard/scheduler';
import { TOKEN, quietLogger, startReplicas, until } from './support.ts';

const NEXT = 'join-token-next-0123456789abcdef';

/** A TCP front to one port, set once known, whose connections the test can reset. */
async function cuttableFront() {
  let port = 0;
  const sockets = new Set<net.Socket>();
  const server = net.createServer((client) => {
    const upstream = net.connect({ host: '127.0.0.1', port });
    for (const [from, to] of [
      [client, upstream],
      [upstream, client],
    ] as const) {
      sockets.add(from);
      from.on('error', () => {});
      from.on('close', () => {
        sockets.delete(from);
        to.destroy();
      });
      from.on('data', (chunk) => to.write(chunk));
    }
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return {
    url: `http://127.0.0.1:${(server.address() as net.AddressInfo).port}`,
    to: (target: number) => void (port = target),
    cut: () => {
      for (const socket of sockets) socket.resetAndDestroy();
    },
    close: () => {
      for (const socket of sockets) socket.destroy();
      server.close();
    },
  };
}

describe('a follower redialling its leader after the sync connection closed', () => {
  const logs: Array<Record<string, unknown>> = [];
  const at =
    (level: string) =>
    (obj: object, msg?: string): void =>
      void logs.push({ ...obj, level, msg });
  const logger = { debug: at('debug'), info: at('info'), warn: at('warn'), error: at('error') };
  const count = (msg: string): number => logs.filter((l) => l.msg === msg).length;
  const refused = (): Array<Record<string, unknown>> =>
    logs.filter((l) => l.msg === 'cannot reach the leader; trying again');

  let front: Awaited<ReturnType<typeof cuttableFront>>;
  let leaderTokens: readonly string[] = [TOKEN];
  // The follower lists, after the cluster's token, one the leader does not take yet (a rotation under way).
  let followerTokens: readonly string[] = [TOKEN, NEXT];
  const replicas: SchedulerReplica[] = [];

  before(async () => {
    const store = new MemoryLeaseStore();
    front = await cuttableFront();
    const [leader] = await startReplicas(1, store, quietLogger, {
      replicaId: 's0',
      advertiseUrl: front.url,
      joinTokens: () => leaderTokens,
    });
    replicas.push(leader!);
    front.to(leader!.port);
    await until('s0 leads', () => leader!.isLeader || undefined);
    const [follower] = await startReplicas(1, store, logger, { replicaId: 's1', joinTokens: () => followerTokens });
    replicas.push(follower!);
    await until('s1 follows s0', () => count('following') > 0 || undefined);
  });
  after(async () => {
    await Promise.all(replicas.map((r) => r.close()));
    front?.close();
  });

  /** Cuts the sync connection (or waits for the leader to close it) and returns once the follower follows again. */
  async function redial(close: () => void): Promise<Array<Record<string, unknown>>> {
    const [closedBefore, followedBefore, refusedBefore] = [
      count('sync connection to the leader closed'),
      count('following'),
      refused().length,
    ];
    close();
    await until('the sync closes', () => count('sync connection to the leader closed') > closedBefore || undefined);
    await until('s1 follows s0 again', () => count('following') > followedBefore || undefined);
    return refused().slice(refusedBefore);
  }

  it('presents the token that worked first, so no attempt is refused', async () => {
    assert.deepEqual(refused(), [], 'the first token of the list was taken at once');
    for (let i = 0; i < 3; i++) {
      assert.deepEqual(await redial(front.cut), [], `redial ${i + 1} presented the token the leader took`);
    }
  });

  it('finds that token by value when the list changed order', async () => {
    followerTokens = [NEXT, TOKEN];
    assert.deepEqual(await redial(front.cut), []);
  });

  it('presents the next token first when the leader withdrew the one it took', async () => {
    // The last step of the rotation, reaching the leader first: it closes the sync within a second.
    leaderTokens = [NEXT];
    assert.deepEqual(await redial(() => {}), []);
    const closed = logs.filter((l) => l.msg === 'sync connection to the leader closed').at(-1);
    assert.equal(closed?.reason, 'credentials withdrawn');
  });
});
