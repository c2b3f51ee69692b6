// Two `switchyard runtime join` commands (real processes) with one --id and one join token: the first
// joins and keeps serving, the second is refused, says the id is held by another live runtime, and
// gives up once its --wait-seconds run out (a restarted runtime whose earlier connection broke gets in
// within them: its old tunnel's pings stop).
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { SchedulerReplica } from '@switchyard/scheduler';
import { compileCacheEnv, killGroup, runCli, spawnCli, startOneReplica, until, type Running } from './support.ts';

const JOIN_TOKEN = 'join-token-0123456789abcdef';

describe('switchyard runtime join, with the id of a runtime that runs', () => {
  let replica: SchedulerReplica;
  let first: Running | undefined;
  before(async () => {
    replica = await startOneReplica({ joinTokens: () => [JOIN_TOKEN] });
    const args = ['runtime', 'join', replica.url, '--token', JOIN_TOKEN, '--id', 'rt-0'];
    first = spawnCli(args, compileCacheEnv());
    await until('the first runtime joined', () => /runtime rt-0 joined /.test(first!.stderr()));
  });
  after(async () => {
    if (first) killGroup(first.child);
    await replica?.close();
  });

  it('is refused, says the id is held by another live runtime and how soon it is free should that one be gone, and leaves the first one serving', async () => {
    const seenBefore = first!.stderr();
    const args = ['runtime', 'join', replica.url, '--token', JOIN_TOKEN, '--id', 'rt-0', '--wait-seconds', '2'];
    const { code, stderr } = await runCli(args);
    assert.equal(code, 1, stderr);
    assert.match(
      stderr,
      /^switchyard: http:\/\/127\.0\.0\.1:\d+ refused the tunnel: the id rt-0 is held by another live runtime \(if that runtime is gone, its tunnel is dropped within ([1-9]|10) s\); pick another --id; dialling again for up to 2 s \(--wait-seconds\)$/m,
    );
    assert.match(
      stderr,
      /^switchyard: gave up dialling http:\/\/127\.0\.0\.1:\d+ after 2 s: the id rt-0 is held by another live runtime; pick another --id$/m,
    );
    assert.equal(first!.stderr(), seenBefore, 'the first runtime said nothing: its tunnel stayed');
    assert.equal(first!.child.exitCode, null);
  });
});
