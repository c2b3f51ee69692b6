// The process harness itself: a cluster whose runtimes never show must not
// leave its processes behind (they would keep the test process alive).
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { readFileSync, readdirSync } from 'node:fs';
import { startCluster } from '../support/cluster.ts';

/** Pids of live processes whose command line (or, with `file` = 'environ', environment) contains `marker`. */
function processesWith(marker: string, file: 'cmdline' | 'environ' = 'cmdline'): number[] {
  const pids: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry) || Number(entry) === process.pid) continue;
    try {
      if (readFileSync(`/proc/${entry}/${file}`, 'utf8').includes(marker)) pids.push(Number(entry));
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

  it('stops the gateways started alongside when the runtimes fail to start', async () => {
    const marker = `harness-${randomBytes(8).toString('hex')}`;
    // An option the runtime does not know: it exits at once, while the gateways start beside it.
    const started = startCluster({
      schedulers: 1,
      runtimes: 2,
      gateways: 2,
      runtimeArgs: ['--no-such-option', '1'],
      env: { TEST_HARNESS_MARKER: marker },
    });
    await assert.rejects(started, /r[01] exited before the log line/);
    assert.deepEqual(processesWith(marker, 'environ'), []);
  });
});
