// A runtime killed without a word whose replica goes silent with it (frozen, cut off): no replica will ever
// report its tunnel closed, and the latest epoch shows the id live behind the silent replica. The restarted
// runtime (another instance) dialling the leader is refused 409 at first, and gets in once the leader marks
// the silent replica's runtimes unavailable (`epoch.staleAfterMs`, 10 s by default): the refusal ends without
// the old replica's help. Separate processes on loopback: two replicas, the runtime first on the follower.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { startCluster, type TestCluster } from '../support/cluster.ts';
import type { AppProcess } from '../support/processes.ts';

const refusedWith409 = (l: Record<string, unknown>): boolean =>
  String(l.msg).startsWith('scheduler refused the tunnel') && l.status === 409;

describe('a runtime restarted while its replica is silent', () => {
  let cluster: TestCluster;
  let first: AppProcess;
  let mine: AppProcess;
  let other: AppProcess;
  before(async () => {
    cluster = await startCluster({ schedulers: 2, runtimes: 0, gateways: 0 });
    other = await cluster.leader();
    const at = cluster.schedulers.findIndex((s) => s !== other);
    mine = cluster.schedulers[at]!;
    first = await cluster.startRuntime('r0', at);
    await cluster.waitForRuntimes(['r0']);
  });
  after(async () => {
    mine?.signal('SIGCONT');
    await cluster?.stop();
  });

  it('is refused at the leader until it marks the silent replica stale, then admitted', async () => {
    mine.signal('SIGSTOP');
    first.signal('SIGKILL');
    await first.exited;
    const second = await cluster.startRuntime('r0', 0, { schedulerUrl: other.url! });
    try {
      const refusal = await second.waitForLog(refusedWith409, 10_000);
      assert.equal(JSON.parse(String(refusal.body)).error, 'runtime id held by another live runtime');
      // 10 s of silence, a cycle, and the restarted runtime's next dial (at most 16 s after its first).
      await second.waitForLog((l) => l.msg === 'tunnel connected', 40_000);
    } finally {
      await second.stop();
    }
  });
});
