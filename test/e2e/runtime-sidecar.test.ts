// A runtime's sidecar API (sidecarPort), as the code beside the runtime
// finds it: the runtime's ready line names its URL, and it answers there.
// It has no free-port choice (0 is off), so a port found free is given.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { startCluster, type TestCluster } from '../support/cluster.ts';
import { freePort } from './support.ts';

describe('a runtime sidecar API', () => {
  let cluster: TestCluster;
  before(async () => {
    cluster = await startCluster({ schedulers: 1, runtimes: 0, gateways: 0 });
  });
  after(() => cluster?.stop());

  it('is named by the ready line, where it answers, and only when it is on', async () => {
    const port = await freePort();
    const withSidecar = await cluster.startRuntime('with-sidecar', 0, { args: ['--sidecar-port', String(port)] });
    const ready = withSidecar.logs.find((l) => l.msg === 'ready');
    assert.equal(ready?.sidecar, `http://127.0.0.1:${port}`);
    const sidecar = String(ready?.sidecar);
    const added = await fetch(`${sidecar}/processes/p1`, { method: 'POST', signal: AbortSignal.timeout(2000) });
    assert.equal(added.status, 204);
    const state = await fetch(`${sidecar}/state`, { signal: AbortSignal.timeout(2000) });
    assert.deepEqual(((await state.json()) as { processes: unknown }).processes, ['p1']);

    const without = await cluster.startRuntime('without-sidecar', 0);
    const plain = without.logs.find((l) => l.msg === 'ready');
    assert.ok(plain, 'it logged its ready line');
    assert.equal('sidecar' in plain, false, JSON.stringify(plain));
  });
});
