// `switchyard status` and `explain` against a scheduler whose API wants a
// token (`apiTokens`): a replica in this process, the command as a child.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { SchedulerReplica } from '@switchyard/scheduler';
import { runCli, startOneReplica } from './support.ts';

const API_TOKEN = 'api-token-0123456789abcdef';

describe('switchyard status and explain with an API token', () => {
  let replica: SchedulerReplica;
  before(async () => {
    replica = await startOneReplica({ joinTokens: () => [], apiTokens: () => [API_TOKEN] });
  });
  after(() => replica?.close());

  it('says the scheduler wants a token, and exits 1, without one', async () => {
    for (const args of [
      ['status', '--scheduler', replica.url],
      ['explain', '--class', 'demo', '--process', 'p', '--scheduler', replica.url],
    ]) {
      const { code, stdout, stderr } = await runCli(args);
      assert.equal(code, 1, stderr);
      assert.equal(stdout, '');
      assert.match(stderr, /refused a request without API token: pass one of its apiTokens with --token/);
    }
    const wrong = await runCli(['status', '--scheduler', replica.url, '--token', 'wrong-token-0123456789abc']);
    assert.equal(wrong.code, 1);
    assert.match(wrong.stderr, /refused the API token/);
  });

  it('answers with --token, or with SWITCHYARD_API_TOKEN', async () => {
    const flag = await runCli(['status', '--scheduler', replica.url, '--token', API_TOKEN]);
    assert.equal(flag.code, 0, flag.stderr);
    assert.match(flag.stdout, /^leader: {3}s0 /m);
    process.env.SWITCHYARD_API_TOKEN = API_TOKEN;
    try {
      const env = await runCli(['explain', '--class', 'demo', '--process', 'p', '--scheduler', replica.url]);
      // No runtime here: the dry run ends unschedulable (exit 1), but the scheduler answered it.
      assert.match(env.stdout, /STAGE +IN +OUT/);
      assert.match(env.stdout, /→ unschedulable at /);
      assert.equal(env.code, 1);
    } finally {
      delete process.env.SWITCHYARD_API_TOKEN;
    }
  });

  it('takes a token pasted with a byte-order mark or a line end around it, as a token file is read', async () => {
    const pasted = `\uFEFF${API_TOKEN}\r\n`;
    const flag = await runCli(['status', '--scheduler', replica.url, '--token', pasted]);
    assert.equal(flag.code, 0, flag.stderr);
    const env = await runCli(['status', '--scheduler', replica.url], 15_000, { SWITCHYARD_API_TOKEN: pasted });
    assert.equal(env.code, 0, env.stderr);
  });

  it('refuses a token no header can carry as bad usage, without showing it', async () => {
    for (const token of ['api-token\nsecret-part', 'api-token\u00a0secret-part', 'api-token\u200bsecret-part']) {
      const { code, stdout, stderr } = await runCli(['status', '--scheduler', replica.url, '--token', token]);
      assert.equal(code, 2, stderr);
      assert.equal(stdout, '');
      assert.match(
        stderr,
        /^switchyard: --token holds a character a token cannot have, at position 10 \(it is not shown\)/,
      );
      assert.doesNotMatch(stderr, /secret-part/);
    }
    const join = await runCli(['runtime', 'join', replica.url, '--token', 'join\rsecret-part']);
    assert.equal(join.code, 2, join.stderr);
    assert.match(join.stderr, /^switchyard: --token holds a character a token cannot have, at position 5 /);
    assert.doesNotMatch(join.stderr, /secret-part/);
  });
});
