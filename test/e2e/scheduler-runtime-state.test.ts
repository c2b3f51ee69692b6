// A scheduler replica as an operator runs it with runtimeState limits below
// what a runtime reports: the option reaches what the replica mirrors of its
// runtimes, the error names it, the runtime takes no new sandbox, and the
// replica's metrics count it. The runtime's sidecar API adds the processes,
// as code beside a runtime would.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { availableRuntimes, startCluster, type TestCluster } from '../support/cluster.ts';
import { until } from '../support/processes.ts';
import { freePort } from './support.ts';

async function scheduleStatus(url: string, processId: string): Promise<number> {
  const res = await fetch(`${url}/api/schedule`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ class: 'demo', processId }),
    signal: AbortSignal.timeout(3000),
  });
  await res.body?.cancel();
  return res.status;
}

async function metricsOf(url: string): Promise<string> {
  const res = await fetch(`${url}/metrics`, { signal: AbortSignal.timeout(3000) });
  assert.equal(res.status, 200);
  return res.text();
}

describe('a scheduler with runtimeState.processesMax below what a runtime reports', () => {
  let cluster: TestCluster;
  before(async () => {
    cluster = await startCluster({
      schedulers: 1,
      runtimes: 0,
      gateways: 0,
      schedulerArgs: ['--runtime-state.processes-max', '2'],
    });
  });
  after(() => cluster?.stop());

  it('logs an error naming the option and places no new sandbox on the runtime, while what it holds goes on', async () => {
    const [scheduler] = cluster.schedulers;
    const url = scheduler!.url!;
    const port = await freePort();
    await cluster.startRuntime('r-big', 0, { args: ['--sidecar-port', String(port)] });
    await until('the runtime is schedulable', async () => (await scheduleStatus(url, 'probe')) === 200 || undefined);
    assert.match(await metricsOf(url), /^switchyard_scheduler_runtimes_over_state_limit 0$/m);

    for (const pid of ['p1', 'p2', 'p3']) {
      const res = await fetch(`http://127.0.0.1:${port}/processes/${pid}`, {
        method: 'POST',
        signal: AbortSignal.timeout(2000),
      });
      assert.equal(res.status, 204, pid);
    }
    const line = await scheduler!.waitForLog((l) => String(l.msg).startsWith('runtime state over the limits'));
    assert.equal(line.runtime, 'r-big');
    assert.equal(line.processesMax, 2);
    assert.match(String(line.msg), /raise runtimeState\.processesMax or runtimeState\.threadsMax/);
    // Monitoring sees it too, for as long as it lasts.
    assert.match(await metricsOf(url), /^switchyard_scheduler_runtimes_over_state_limit 1$/m);
    // A fresh process each time: a replica pins where it placed a process until the runtime reports it.
    let asked = 0;
    await until(
      'no new sandbox goes to the runtime',
      async () => (await scheduleStatus(url, `another-${++asked}`)) === 503 || undefined,
    );
    // It serves on: a sandbox it held still goes there, and it stays live (its id claimed by its token).
    assert.equal(await scheduleStatus(url, 'p1'), 200);
    assert.deepEqual(await availableRuntimes(url), ['r-big']);
  });
});
