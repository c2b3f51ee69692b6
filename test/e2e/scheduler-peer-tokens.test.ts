// Replicas sync epochs presenting a token to their leader. Given peerTokens
// (peerTokenFile, as the chart mounts its Secret), only those admit a peer:
// runtimes' join tokens, held on the least trusted machines, no longer do,
// even once the file lists none. Given none, join tokens still do, and the
// scheduler says so at start; join tokens scoped to runtime ids never do, and
// a scheduler with only those says no replica syncs with it. Schedulers as processes over loopback; nothing
// here is about their shutdown, so they stop without the drain delay.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { spawnApp, until, type AppProcess } from '../support/processes.ts';
import { upgradeStatus } from './raw-connections.ts';

const JOIN = 'join-token-0123456789abcdef';
const PEER = 'peer-token-0123456789abcdef';
const NO_PEER_TOKENS = /^no peer tokens configured/;

/** The status of an upgrade to `/api/sync/probe` presenting `token` (101: admitted; 401: refused). */
function syncStatus(url: string, token: string): Promise<number> {
  return upgradeStatus(`${url}/api/sync/probe`, { authorization: `Bearer ${token}` });
}

describe('schedulers given a peer token file', () => {
  let dir: string;
  let peerFile: string;
  const apps: AppProcess[] = [];
  let leader: AppProcess;
  let follower: AppProcess;

  const scheduler = async (name: string): Promise<AppProcess> => {
    const app = await spawnApp('scheduler', name, [
      ...['--host', '127.0.0.1', '--port', '0', '--replica-id', name, '--drain-delay-ms', '0'],
      ...['--election.backend', 'file', '--election.lease-file', join(dir, 'lease.json')],
      ...['--election.lease-duration-ms', '3000', '--election.renew-deadline-ms', '2000'],
      ...['--election.retry-period-ms', '500', '--join-tokens', JOIN, '--peer-token-file', peerFile],
    ]);
    apps.push(app);
    return app;
  };

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'switchyard-peer-token-file-'));
    peerFile = join(dir, 'peer-tokens');
    writeFileSync(peerFile, `${PEER}\n`);
    leader = await scheduler('s0');
    await leader.waitForLog((l) => l.msg === 'leading');
    follower = await scheduler('s1');
  });
  after(async () => {
    await Promise.all(apps.map((a) => a.stop()));
    rmSync(dir, { recursive: true, force: true });
  });

  it('syncs its replicas on the peer token and refuses a peer presenting a join token', async () => {
    await follower.waitForLog((l) => l.msg === 'following');
    assert.equal(await syncStatus(leader.url!, JOIN), 401);
    assert.equal(await syncStatus(leader.url!, PEER), 101);
    for (const app of [leader, follower]) {
      assert.equal(app.logs.filter((l) => NO_PEER_TOKENS.test(String(l.msg))).length, 0, app.name);
    }
  });

  it('admits no peer once the file lists none, join tokens neither, and says so naming the file', async () => {
    writeFileSync(peerFile, '');
    // The file is looked at again at most once a second; an upgrade makes it look.
    await until('the emptied file is read', async () => (await syncStatus(leader.url!, PEER)) === 401);
    assert.equal(await syncStatus(leader.url!, JOIN), 401);
    const warning = await leader.waitForLog((l) => l.file === peerFile);
    assert.equal(warning.level, 40, 'a warning');
    assert.match(String(warning.msg), /lists no peer token/);
  });
});

describe('a scheduler given no peer tokens', () => {
  let scheduler: AppProcess;
  before(async () => {
    scheduler = await spawnApp('scheduler', 'no-peer-tokens', [
      ...['--host', '127.0.0.1', '--port', '0', '--replica-id', 'no-peer-tokens', '--drain-delay-ms', '0'],
      ...['--join-tokens', JOIN],
    ]);
  });
  after(() => scheduler?.stop());

  it('admits peers on the join tokens, and warns once at start, naming the option', async () => {
    assert.equal(await syncStatus(scheduler.url!, JOIN), 101);
    const warnings = scheduler.logs.filter((l) => NO_PEER_TOKENS.test(String(l.msg)));
    assert.equal(warnings.length, 1);
    assert.equal(warnings[0]!.level, 40);
    assert.equal(warnings[0]!.option, 'peerTokens');
  });
});

describe('a scheduler given no peer tokens and only join tokens scoped to runtime ids', () => {
  let scheduler: AppProcess;
  before(async () => {
    scheduler = await spawnApp('scheduler', 'scoped-join-tokens', [
      ...['--host', '127.0.0.1', '--port', '0', '--replica-id', 'scoped-join-tokens', '--drain-delay-ms', '0'],
      ...['--join-tokens', `${JOIN} rt-*`],
    ]);
  });
  after(() => scheduler?.stop());

  it('admits no peer, and says at start that no replica syncs with it until peer tokens are set', async () => {
    assert.equal(await syncStatus(scheduler.url!, JOIN), 401);
    const warnings = scheduler.logs.filter((l) => NO_PEER_TOKENS.test(String(l.msg)));
    assert.equal(warnings.length, 1);
    assert.equal(warnings[0]!.level, 40);
    assert.equal(warnings[0]!.option, 'peerTokens');
    assert.match(String(warnings[0]!.msg), /every join token is scoped.*no replica syncs epochs/);
  });
});

describe('a scheduler given no peer tokens whose join token file comes to scope every token', () => {
  let dir: string;
  let joinFile: string;
  let scheduler: AppProcess;
  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'switchyard-scoped-join-file-'));
    joinFile = join(dir, 'join-tokens');
    writeFileSync(joinFile, `${JOIN}\n`);
    scheduler = await spawnApp('scheduler', 'scoped-join-file', [
      ...['--host', '127.0.0.1', '--port', '0', '--replica-id', 'scoped-join-file', '--drain-delay-ms', '0'],
      ...['--join-token-file', joinFile],
    ]);
  });
  after(async () => {
    await scheduler?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('says then that no replica syncs with it', async () => {
    assert.equal(await syncStatus(scheduler.url!, JOIN), 101);
    writeFileSync(joinFile, `${JOIN} rt-*\n`);
    // The file is looked at again at most once a second; an upgrade makes it look.
    await until('the scoped file is read', async () => (await syncStatus(scheduler.url!, JOIN)) === 401);
    const warning = await scheduler.waitForLog((l) => /every join token is scoped/.test(String(l.msg)));
    assert.equal(warning.level, 40);
    assert.equal(warning.option, 'peerTokens');
  });
});
