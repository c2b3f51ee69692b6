// The process harness itself: a cluster whose runtimes never show must not
// leave its processes behind (they would keep the test process alive).
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { readFileSync, readdirSync } from 'node:fs';
import { startCluster } from '../support/cluster.ts';

/** Pids of live processes whose command line contains `marker`. */
function processesWith(marker: string): number[] {
  const pids: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry) || Number(entry) === process.pid) continue;
    try {
      if (readFileSync(`/proc/${entry}/cmdline`, 'utf8').includes(marker)) pids.push(Number(entry));
    } catch {
      // exited while we looked
    }
  }
  return pids;
}

describe('startCluster', () => {
  it('stops every process it spawned when the runtimes never show at start-up', async () => {
    const marker = `harness-${randomBytes(8).toString('hex')}`;
    // A join token the schedulers do not know: runtimes start, are refused, and never show.
    const started = startCluster({
      schedulers: 2,
      runtimes: 1,
      gateways: 0,
      schedulerArgs: ['--election.lease-name', marker],
      runtimeArgs: ['--join-token', `${marker}-token`],
      startTimeoutMs: 1500,
    });
    await assert.rejects(started, /timed out after 1500 ms waiting for runtimes r0/);
    assert.deepEqual(processesWith(marker), []);
  });
});
