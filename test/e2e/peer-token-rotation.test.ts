// Scheduler replicas sync epochs presenting a join token to their leader.
// In a cluster, kubelet updates each pod's mounted Secret on its own
// schedule (up to a minute apart), so during a join token rotation the
// leader's file may already list only the new token while a follower's
// still lists the old one first. Two schedulers as processes, each with its
// own token file, and a runtime held by the follower.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { spawnApp, until, type AppProcess } from '../support/processes.ts';

const OLD = 'join-token-old-0123456789abcdef';
const NEW = 'join-token-new-0123456789abcdef';

describe('a join token rotation that reaches the leader before a follower', () => {
  let dir: string;
  const files = { leader: '', follower: '' };
  const apps: AppProcess[] = [];
  let leader: AppProcess;
  let follower: AppProcess;

  const scheduler = async (name: string, file: string): Promise<AppProcess> => {
    const app = await spawnApp('scheduler', name, [
      ...['--host', '127.0.0.1', '--port', '0', '--replica-id', name, '--drain-delay-ms', '0'],
      ...['--election.backend', 'file', '--election.lease-file', join(dir, 'lease.json')],
      ...['--election.lease-duration-ms', '3000', '--election.renew-deadline-ms', '2000'],
      ...['--election.retry-period-ms', '500', '--join-token-file', file],
    ]);
    apps.push(app);
    return app;
  };

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'switchyard-peer-tokens-'));
    files.leader = join(dir, 'leader-join-tokens');
    files.follower = join(dir, 'follower-join-tokens');
    // The first step of the rotation, done everywhere: both tokens, the old one first.
    for (const file of Object.values(files)) writeFileSync(file, `${OLD}\n${NEW}\n`);
    leader = await scheduler('s0', files.leader);
    await leader.waitForLog((l) => l.msg === 'leading');
    follower = await scheduler('s1', files.follower);
    await follower.waitForLog((l) => l.msg === 'following');
    apps.push(
      await spawnApp('runtime', 'rt', [
        ...['--runtime-id', 'rt', '--scheduler-url', follower.url!, '--join-token', NEW],
        ...['--tunnel.ping-interval-ms', '1000', '--drain-delay-ms', '0'],
      ]),
    );
    await until('the leader commits the follower runtime', () => available(leader));
  });
  after(async () => {
    await Promise.all(apps.map((a) => a.stop()));
    rmSync(dir, { recursive: true, force: true });
  });

  async function available(s: AppProcess): Promise<boolean> {
    const res = await fetch(`${s.url}/api/runtimes`, { signal: AbortSignal.timeout(2000) });
    const { runtimes } = (await res.json()) as { runtimes: { id: string; available: boolean }[] };
    return runtimes.some((r) => r.id === 'rt' && r.available);
  }

  it('keeps the follower syncing on a token both still share, and its runtimes available', async () => {
    const followed = (): number => follower.logs.filter((l) => l.msg === 'following').length;
    const before = followed();
    // The last step, as kubelet delivers it to the leader's pod first.
    writeFileSync(files.leader, `${NEW}\n`);
    await follower.waitForLog((l) => l.msg === 'sync connection to the leader closed');
    await until('the follower syncs with the leader again', () => followed() > before || undefined, 8000).catch(
      (error: Error) => {
        const recent = follower.logs.slice(-6).map((l) => [l.msg, l.err ?? l.reason]);
        throw new Error(`${error.message}; follower: ${JSON.stringify(recent)}`);
      },
    );
    assert.ok(await available(leader), "the follower's runtime is still available in the leader's epochs");
  });

  // operations.md: a follower logs `cannot reach the leader; trying again` at the first failed attempt.
  it('warns at once when the leader refuses every token it holds, after a sync that worked', async () => {
    const refused = (l: Record<string, unknown>): boolean =>
      l.msg === 'cannot reach the leader; trying again' && l.level === 40;
    const warnedBefore = follower.logs.filter(refused).length;
    const closedBefore = follower.logs.filter((l) => l.msg === 'sync connection to the leader closed').length;
    writeFileSync(files.leader, 'join-token-newer-0123456789abcdef\n');
    await until(
      'the leader closes the sync',
      () =>
        follower.logs.filter((l) => l.msg === 'sync connection to the leader closed').length > closedBefore ||
        undefined,
    );
    // The retries start at 100 ms; the tenth failure comes some 14 s later.
    await until('a warning', () => follower.logs.filter(refused).length > warnedBefore || undefined, 5000);
  });
});
