// `switchyard runtime join` against a scheduler replica in this process (the
// command as a child): a refusal ends it with exit code 1 and a line that
// says what the scheduler refused, and why.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { SchedulerReplica } from '@switchyard/scheduler';
import { runCli, startOneReplica } from './support.ts';

const JOIN_TOKEN = 'join-token-0123456789abcdef';

describe('switchyard runtime join, refused', () => {
  let replica: SchedulerReplica;
  before(async () => {
    replica = await startOneReplica({ joinTokens: () => [JOIN_TOKEN] });
  });
  after(() => replica?.close());

  it('names the field the scheduler refused and the rule it broke, and exits 1', async () => {
    const { code, stderr } = await runCli(['runtime', 'join', replica.url, '--token', JOIN_TOKEN, '--id', 'two words']);
    assert.equal(code, 1, stderr);
    assert.match(
      stderr,
      /^switchyard: http:\/\/127\.0\.0\.1:\d+ refused this runtime: invalid X-Runtime-Info \(id: must be 1-128 characters from \[A-Za-z0-9\._:@-\]\)$/m,
    );
  });
});
