// Runtimes hold join tokens, and run on the least trusted machines of a
// cluster. Peers sync epochs presenting a token too; where it was a join
// token, whoever held a runtime's could join the sync as a follower and
// report runtimes in the epochs (an owner URL of its own, which gateways then
// dial). Given peer tokens, only those admit a peer, and a follower presents
// them; without, join tokens still do. Real replicas on loopback.
import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { connectSync } from '@switchyard/epoch';
import { MemoryLeaseStore } from '@switchyard/election';
import type { SchedulerReplica } from '@switchyard/scheduler';
import { TOKEN, quietLogger, startReplicas, until } from './support.ts';

const PEER = 'peer-token-0123456789abcdef';
/** A follower's join tokens, not the leader's: only a peer token they share lets it sync. */
const OTHER_JOIN = 'other-join-token-0123456789';

const bearer = (token: string) => ({ headers: { authorization: `Bearer ${token}` } });

describe('a cluster given peer tokens', () => {
  const replicas: SchedulerReplica[] = [];
  after(() => Promise.all(replicas.map((r) => r.close())));

  it('refuses a peer presenting a join token, and syncs its replicas on the peer token', async () => {
    const store = new MemoryLeaseStore();
    const [leader] = await startReplicas(1, store, quietLogger, { peerTokens: () => [PEER] });
    replicas.push(leader!);
    await until('s0 leads', () => leader!.isLeader || undefined);

    await assert.rejects(connectSync(leader!.url, 'intruder', bearer(TOKEN)), /HTTP 401/);
    (await connectSync(leader!.url, 'peer', bearer(PEER))).close(1000, 'done');

    const follows: string[] = [];
    const logger = { ...quietLogger, info: (_o: object, msg?: string) => void follows.push(msg ?? '') };
    const [follower] = await startReplicas(1, store, logger, {
      replicaId: 's1',
      joinTokens: () => [OTHER_JOIN],
      peerTokens: () => [PEER],
    });
    replicas.push(follower!);
    await until('s1 follows s0 on the peer token', () => follows.includes('following') || undefined);
  });
});

describe('a cluster given no peer tokens', () => {
  const replicas: SchedulerReplica[] = [];
  after(() => Promise.all(replicas.map((r) => r.close())));

  it('admits peers on the join tokens, as before peer tokens existed', async () => {
    const [leader] = await startReplicas(1);
    replicas.push(leader!);
    await until('s0 leads', () => leader!.isLeader || undefined);
    (await connectSync(leader!.url, 'peer', bearer(TOKEN))).close(1000, 'done');
    await assert.rejects(connectSync(leader!.url, 'intruder', bearer(PEER)), /HTTP 401/);
  });
});
