// A replica that no leader reaches any more keeps answering from its last
// epoch, and that epoch's number stands still: nothing in it says it is old.
// Here the lease passes to a holder at an address nobody listens on (as when
// a leader dies holding it, or a partition cuts a replica off), so the
// replicas' views freeze. The live page, /api/epoch and `switchyard status`
// must show how long ago the view was last known to be current, and call it
// out once that is longer than a leader waits before it gives up on a
// silent follower (10 s).
import { execFile } from 'node:child_process';
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import type { Browser } from 'playwright-core';
import { launchChromium, skipWithoutChromium } from './browser.ts';
import { MemoryLeaseStore, formatHolder } from '@switchyard/election';
import type { RuntimeNode } from '@switchyard/runtime';
import type { SchedulerReplica } from '@switchyard/scheduler';
import { epochOf, runtimeIds, startReplicas, startRuntime, until } from './cluster.ts';
import { SseStream } from './sse.ts';

const CLI = fileURLToPath(new URL('../../apps/cli/src/main.ts', import.meta.url));
const execFileAsync = promisify(execFile);
/** What the page and the CLI take as an out-of-date view (the leader's default `staleAfterMs`). */
const STALE_MS = 10_000;

interface State {
  epoch: number | null;
  epochAgeMs: number | null;
}

describe('a replica whose view no leader refreshes any more', () => {
  const store = new MemoryLeaseStore();
  let replicas: SchedulerReplica[] = [];
  let runtime: RuntimeNode | undefined;
  let browser: Browser | undefined;
  let stream: SseStream | undefined;
  let follower = '';

  before(async () => {
    replicas = await startReplicas(2, {}, store);
    runtime = await startRuntime('rt-1', replicas[1]!.url);
    follower = replicas[1]!.url;
    await until('both replicas to list rt-1', async () =>
      (await Promise.all(replicas.map((r) => runtimeIds(r.url)))).every((ids) => ids.includes('rt-1')),
    );
  });

  after(async () => {
    stream?.close();
    await browser?.close();
    await runtime?.close();
    await Promise.allSettled(replicas.map((r) => r.close()));
  });

  it('reports the age of its epoch while in sync: under a few cycles', async () => {
    const api = await epochOf(follower);
    assert.ok(typeof api.epochAgeMs === 'number' && api.epochAgeMs < 2000, `epochAgeMs ${api.epochAgeMs}`);
    stream = await SseStream.open(`${follower}/ui/events`);
    const state = await stream.nextState<State>();
    assert.ok(typeof state.epochAgeMs === 'number' && state.epochAgeMs < 2000, `epochAgeMs ${state.epochAgeMs}`);
  });

  it('lets the age grow once the lease is held where nobody answers, and says so', async () => {
    const now = new Date();
    // Overwritten unconditionally: the leader loses the lease at its next renewal, and nobody leads at the address.
    store.update({
      holderIdentity: formatHolder({ id: 'ghost', address: 'http://127.0.0.1:1' }),
      leaseDurationSeconds: 3600,
      acquireTime: now,
      renewTime: now,
      leaseTransitions: 100,
    });
    const stale = await stream!.nextState<State>((s) => (s.epochAgeMs ?? 0) > STALE_MS, STALE_MS + 10_000);
    // Read after the view went stale: the leader may still commit once before its next renewal finds the lease gone.
    const api = await epochOf(follower);
    assert.equal(api.epoch, stale.epoch, 'the view stood still');
    assert.ok((api.epochAgeMs ?? 0) > STALE_MS);
    const status = await execFileAsync(process.execPath, [CLI, 'status', '--scheduler', follower], { timeout: 15_000 });
    assert.match(status.stdout, /^epoch: +\d+ +\(as seen by s1, in sync \d+ s ago\)$/m, status.stdout);
    assert.match(status.stdout, /^warning: +no leader has reached s1 for \d+ s/m, status.stdout);
  });

  it('marks the epoch out of date on the live page', { skip: skipWithoutChromium }, async () => {
    browser = await launchChromium();
    const page = await browser.newPage();
    await page.goto(`${follower}/ui`);
    await page.locator('#epoch-age.stale', { hasText: 'no leader reaches this replica' }).waitFor({ timeout: 5000 });
    assert.equal(await page.locator('#leader').innerText(), 'ghost');
  });
});
