// A replica refuses a runtime id to another runtime process (another instance) while its latest epoch shows
// the id live behind another replica. That epoch vouches for the runtime only while the replica hears from a
// leader: one whose leader is gone and no other leads (the lease unwritable, an election that does not end),
// or that is cut off from it, holds an epoch that shows the runtime live for as long as that lasts. Its
// restarted process, landing there, must get in once the epoch is as old as the leader's own bound on a
// silent replica's report (`epoch.staleAfterMs`), not be locked out until a leader commits again.
// Real replicas on loopback; the lease is a memory lock that the follower cannot write.
import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { RuntimeNode } from '@switchyard/runtime';
import { MemoryLeaseStore, createMemoryLock } from '@switchyard/election';
import type { SchedulerReplica } from '@switchyard/scheduler';
import { dialTunnel, type TunnelDialer } from '@switchyard/tunnel';
import { TOKEN, getJson, quietLogger, startReplicas, startRuntime, until } from './support.ts';

const STALE_AFTER_MS = 3000;
const epoch = { cycleIntervalMs: 200, staleAfterMs: STALE_AFTER_MS };

/** Another runtime process with the id `id` (its own instance) dialling `url`; the statuses it was refused with. */
function restarted(url: string, id: string): { dialer: TunnelDialer; refusals: number[] } {
  const refusals: number[] = [];
  const dialer = dialTunnel({
    url,
    token: TOKEN,
    info: { id, classes: ['demo'], metadata: {}, version: '1.0.0', limits: {} },
    instance: 'instance-restarted-0123456789',
    backoff: { initialMs: 100, maxMs: 400 },
    handler: (_req, res) => void res.end('restarted'),
    logger: {
      ...quietLogger,
      error: (fields: object) => void refusals.push((fields as { status?: number }).status ?? 0),
    },
  });
  return { dialer, refusals };
}

describe('a runtime id shown live at another replica by an epoch no leader confirms any more', () => {
  const replicas: SchedulerReplica[] = [];
  const dialers: TunnelDialer[] = [];
  let runtime: RuntimeNode | undefined;
  after(async () => {
    await Promise.all(dialers.map((d) => d.close()));
    await runtime?.close();
    await Promise.all(replicas.map((r) => r.close()));
  });

  it('is refused to a restarted process while the epoch is current, and admitted once it is stale', async () => {
    const store = new MemoryLeaseStore();
    const [s0] = await startReplicas(1, store, quietLogger, { replicaId: 's0', epoch });
    replicas.push(s0!);
    await until('s0 leads', () => s0!.isLeader || undefined);
    // s1 reads the lease but never writes it: once s0 is gone, no replica leads.
    const lock = createMemoryLock(store, {
      intercept: ({ op }) => {
        if (op !== 'get') throw new Error('s1 cannot write the lease');
      },
    });
    const [s1] = await startReplicas(1, store, quietLogger, { replicaId: 's1', lock, epoch });
    replicas.push(s1!);
    runtime = await startRuntime('r0', s0!.url);
    await until('s1 shows r0 live behind s0', async () => {
      const { status, body } = await getJson(`${s1!.url}/api/runtime/r0`);
      return (status === 200 && body.runtime.owner === 's0' && body.runtime.available) || undefined;
    });

    const early = restarted(s1!.url, 'r0');
    dialers.push(early.dialer);
    await until('the first refusal', () => early.refusals.length > 0 || early.dialer.connected || undefined);
    assert.equal(early.dialer.connected, false, 'refused while the epoch is current');
    assert.equal(early.refusals[0], 409);
    await early.dialer.close();

    // s0 dies with r0's tunnel: s1's last epoch shows r0 live behind s0, and no leader commits another.
    await s0!.close();
    const late = restarted(s1!.url, 'r0');
    dialers.push(late.dialer);
    await until('the restarted process admitted at s1', () => late.dialer.connected || undefined, 4 * STALE_AFTER_MS);
    assert.equal(s1!.isLeader, false, 's1 never led: its epoch stayed the one s0 committed');
  });
});
