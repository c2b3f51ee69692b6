// A runtime's health listener, as kubelet and Prometheus meet it, with
// processes on loopback: /healthz answers while the process does, /readyz
// only while its tunnel is up (a rollout waits for each new runtime to
// join; a runtime whose id another took stays unready, one that dials with the id of a runtime that runs
// is refused), /metrics is the
// runtime's own registry, reached without a scheduler.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { dialTunnel } from '@switchyard/tunnel';
import { startCluster, type TestCluster } from '../support/cluster.ts';
import { until } from '../support/processes.ts';

describe('a runtime health listener', () => {
  let cluster: TestCluster;
  let health: string;
  before(async () => {
    cluster = await startCluster({ schedulers: 1, runtimes: 0, gateways: 0 });
    // Port 0, as every listener in a test: a port found free first may be taken by the time it binds.
    const args = ['--health.enabled', 'true', '--health.host', '127.0.0.1', '--health.port', '0'];
    const runtime = await cluster.startRuntime('probed', 0, { args });
    const ready = runtime.logs.find((l) => l.msg === 'ready');
    assert.match(String(ready?.health), /^http:\/\/127\.0\.0\.1:[1-9]\d*$/, 'its ready line says where');
    health = String(ready?.health);
    await cluster.waitForRuntimes(['probed']);
  });
  after(() => cluster?.stop());

  const probe = async (path: string): Promise<{ status: number; body: string }> => {
    const res = await fetch(`${health}${path}`, { signal: AbortSignal.timeout(2000) });
    return { status: res.status, body: await res.text() };
  };

  it('is ready with its tunnel up, and serves its metrics', async () => {
    assert.deepEqual(await probe('/healthz'), { status: 200, body: '{"status":"ok"}' });
    assert.deepEqual(await probe('/readyz'), { status: 200, body: '{"status":"ready"}' });
    const metrics = await probe('/metrics');
    assert.equal(metrics.status, 200);
    assert.match(metrics.body, /^switchyard_runtime_tunnel_connected 1$/m);
    assert.equal((await probe('/nope')).status, 404);
  });

  it('turns unready, not unhealthy, while no scheduler holds its tunnel, and ready again once one does', async () => {
    const scheduler = cluster.schedulers[0]!;
    await scheduler.stop(1000);
    await until('the runtime unready', async () => (await probe('/readyz')).status === 503 || undefined);
    assert.deepEqual(await probe('/readyz'), { status: 503, body: '{"status":"disconnected"}' });
    assert.equal((await probe('/healthz')).status, 200, 'a restart would not help it');
    await cluster.restartScheduler(0);
    await until('the runtime ready again', async () => (await probe('/readyz')).status === 200 || undefined, 15_000);
  });

  it('stays ready, and keeps its id, when another runtime dials with the same id and token', async () => {
    const first = cluster.runtimes[0]!;
    const drops = (): number => first.logs.filter((l) => l.msg === 'tunnel disconnected').length;
    const dropsBefore = drops();
    const second = await cluster.startRuntime('probed', 0);
    const refused = (l: Record<string, unknown>): boolean =>
      String(l.msg).startsWith('scheduler refused the tunnel') && l.status === 409;
    await until('the second runtime refused', () => second.logs.some(refused) || undefined);
    assert.match(String(JSON.parse(String(second.logs.find(refused)!.body)).error), /held by another live runtime/);
    assert.deepEqual(await probe('/readyz'), { status: 200, body: '{"status":"ready"}' });
    await second.stop();
    assert.equal(drops(), dropsBefore, 'the first one kept its tunnel');
  });

  it('turns unready, and stays off its id for minutes, once a runtime of an earlier release takes its id', async () => {
    // Such a runtime names no instance, and takes a live runtime's id as every runtime once did.
    const older = dialTunnel({
      url: cluster.schedulers[0]!.url!,
      token: cluster.token,
      info: { id: 'probed', classes: ['demo'], metadata: {}, version: '1.0.0', limits: {} },
      instance: null,
      handler: (_req, res) => void res.writeHead(404).end(),
    });
    try {
      await until('the runtime unready', async () => (await probe('/readyz')).status === 503 || undefined);
      assert.deepEqual(await probe('/readyz'), {
        status: 503,
        body: '{"status":"replaced by another runtime with this id"}',
      });
      assert.equal((await probe('/healthz')).status, 200, 'a restart would take the id back');
      const said = cluster.runtimes[0]!.logs.find((l) =>
        String(l.msg).startsWith('another runtime connected with this runtime id'),
      );
      assert.equal(said?.level, 50, 'logged at error level');
      // Long enough for several redials had it tried again (ping interval and backoff are short here).
      await new Promise((resolve) => setTimeout(resolve, 1500));
      assert.equal((await probe('/readyz')).status, 503);
      assert.equal(older.connected, true, 'the newer one keeps the id');
    } finally {
      await older.close();
    }
  });
});
