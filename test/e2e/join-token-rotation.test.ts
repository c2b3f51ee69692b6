// Rotating the runtimes' join token without restarting anything, as
// separate processes on loopback: schedulers read their token file again
// when it changes (as the chart mounts its Secret), and so does a runtime
// at each dial. Dropping the old token from the schedulers closes the
// tunnel still on it; the runtime redials with the new one, and its
// sessions carry on. A runtime refused for its token dials again as soon
// as its token file changes.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { startCluster, type TestCluster } from '../support/cluster.ts';
import { until } from '../support/processes.ts';
import { connect, counter, whoami } from './support.ts';

const OLD = 'join-token-old-0123456789abcdef';
const NEW = 'join-token-new-0123456789abcdef';

describe('rotating the join token', () => {
  let dir: string;
  let schedulersFile: string;
  let runtimeFile: string;
  let cluster: TestCluster;
  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'switchyard-join-tokens-'));
    schedulersFile = join(dir, 'scheduler-join-tokens');
    runtimeFile = join(dir, 'runtime-join-token');
    writeFileSync(schedulersFile, `${OLD}\n`);
    writeFileSync(runtimeFile, `${OLD}\n`);
    cluster = await startCluster({
      schedulers: 2,
      runtimes: 0,
      gateways: 1,
      schedulerArgs: ['--join-token-file', schedulersFile],
    });
    await cluster.startRuntime('rot', 0, { joinTokenFile: runtimeFile });
    await cluster.waitForRuntimes(['rot']);
  });
  after(async () => {
    await cluster?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('closes the tunnel still on the old token; the runtime comes back on the new one, sessions and all', async () => {
    const client = await connect('v2', cluster.gatewayUrl());
    try {
      assert.equal((await whoami(client)).runtime, 'rot');
      assert.equal(await counter(client), 1);
      // The order operators follow: both tokens, then the runtime's Secret, then only the new one.
      writeFileSync(schedulersFile, `${OLD}\n${NEW}\n`);
      writeFileSync(runtimeFile, `${NEW}\n`);
      assert.equal(await counter(client), 2, 'nothing changes while both are accepted');
      const owner = cluster.schedulers[0]!;
      const opened = (): number => owner.logs.filter((l) => l.msg === 'tunnel open' && l.runtime === 'rot').length;
      const openedBefore = opened();
      writeFileSync(schedulersFile, `${NEW}\n`);
      await owner.waitForLog((l) => l.msg === 'tunnel closed: its join token was removed' && l.runtime === 'rot');
      const runtime = cluster.runtimes[0]!;
      await until('the runtime redialled', () => opened() > openedBefore || undefined).catch((error: Error) => {
        // What each side last said, for a failure seen only under load.
        const recent = (logs: Array<Record<string, unknown>>): string =>
          JSON.stringify(logs.slice(-12).map((l) => [l.time, l.msg, l.reason ?? l.err]));
        throw new Error(`${error.message}; runtime: ${recent(runtime.logs)}; scheduler: ${recent(owner.logs)}`);
      });
      await cluster.waitForRuntimes(['rot']);
      assert.equal(await counter(client), 3, 'the session lives on across the redial');
      const refused = runtime.logs.filter((l) => /refused/.test(String(l.msg)));
      assert.deepEqual(refused, [], 'the runtime presented the new token at once');
    } finally {
      await client.close();
    }
  });

  it('has a runtime refused for a stale token join within seconds of its file changing, not 30 s', async () => {
    // Rotated in the wrong order: the schedulers dropped the token before the runtime's Secret changed.
    const lateFile = join(dir, 'late-join-token');
    writeFileSync(lateFile, `${OLD}\n`);
    const late = await cluster.startRuntime('late', 0, { joinTokenFile: lateFile });
    await late.waitForLog((l) => l.msg === 'scheduler refused the tunnel' && l.status === 401);
    const changed = performance.now();
    writeFileSync(lateFile, `${NEW}\n`);
    await late.waitForLog((l) => l.msg === 'tunnel connected', 10_000);
    const joinedMs = performance.now() - changed;
    assert.ok(joinedMs < 5000, `joined ${joinedMs.toFixed(0)} ms after its token changed`);
    assert.ok(late.logs.some((l) => l.msg === 'join token changed; dialling again'));
  });
});
