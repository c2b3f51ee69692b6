// `runtime join` given more than one scheduler replica (a cluster with no Service in front of its replicas,
// as `switchyard up` runs one): a dial that fails moves on to the next, so the runtime joins past a replica
// that is down, and one whose replica goes away once joined moves to another instead of waiting for it.
import { after, afterEach, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { SchedulerReplica } from '@switchyard/scheduler';
import { killGroup, spawnCli, startOneReplica, until, type Running } from './support.ts';

const JOIN_TOKEN = 'join-token-0123456789abcdef';
/** Nothing listens on port 1: a replica that is down. */
const DOWN = 'http://127.0.0.1:1';

/** Whether `join` has said it joined `url`; throws once it has exited instead. */
function joinedAt(join: Running, id: string, url: string): boolean {
  if (join.child.exitCode !== null) throw new Error(`runtime join exited ${join.child.exitCode}:\n${join.stderr()}`);
  return join.stderr().includes(`runtime ${id} joined ${url}`);
}

/** Whether `replica`'s latest epoch lists `id` as available. */
async function lists(replica: SchedulerReplica, id: string): Promise<boolean> {
  const answer = (await (await fetch(`${replica.url}/api/runtimes`)).json()) as {
    runtimes: { id: string; available: boolean }[];
  };
  return answer.runtimes.some((runtime) => runtime.id === id && runtime.available);
}

describe('switchyard runtime join, given several scheduler replicas', () => {
  let first: SchedulerReplica | undefined;
  let second: SchedulerReplica;
  let join: Running | undefined;
  before(async () => {
    second = await startOneReplica({ joinTokens: () => [JOIN_TOKEN] });
  });
  afterEach(async () => {
    if (join) killGroup(join.child);
    join = undefined;
    await first?.close();
    first = undefined;
  });
  after(() => second?.close());

  it('joins the next one when the first cannot be reached, naming the one it could not reach', async () => {
    join = spawnCli(['runtime', 'join', DOWN, second.url, '--token', JOIN_TOKEN, '--id', 'rt-0']);
    await until('the joined line', () => joinedAt(join!, 'rt-0', second.url));
    assert.match(join.stderr(), /^switchyard: cannot reach http:\/\/127\.0\.0\.1:1: .*nothing listens there/m);
    join.child.kill('SIGINT');
    assert.equal((await join.exited).code, 0, join.stderr());
  });

  it('moves to another replica when the one it joined goes away, naming the one it left and the one it is connected to', async () => {
    first = await startOneReplica({ joinTokens: () => [JOIN_TOKEN] });
    join = spawnCli(['runtime', 'join', first.url, second.url, '--token', JOIN_TOKEN, '--id', 'rt-1']);
    await until('the joined line', () => joinedAt(join!, 'rt-1', first!.url));
    await first.close();
    await until('the second replica listing the runtime', () => lists(second, 'rt-1'));
    await until('the tunnel said up again', () => /^switchyard: tunnel connected/m.test(join!.stderr()));
    assert.match(
      join.stderr(),
      new RegExp(`^switchyard: tunnel disconnected from ${first.url.replaceAll('.', '\\.')} \\(.+\\)$`, 'm'),
    );
    assert.match(
      join.stderr(),
      new RegExp(`^switchyard: tunnel connected to ${second.url.replaceAll('.', '\\.')}$`, 'm'),
    );
    assert.equal(join.child.exitCode, null, join.stderr());
  });
});
