// An embedder's runtime version is refused at start when schedulers would
// refuse the join for it: otherwise the node starts, dials, and only its logs
// show the scheduler's 400, again at every retry.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { RUNTIME_VERSION_MESSAGE, SwitchyardError } from '@switchyard/protocol';
import { startRuntimeNode } from '../src/index.ts';
import { nodeOptions } from './support.ts';

const refused = ['latest', '1.4', '', 'abc1234'];
const taken = ['1.4.2', '2.0.0-rc.1', 'v3.0.0'];

describe('runtime node version', () => {
  for (const version of refused) {
    it(`refuses ${JSON.stringify(version)} at start, naming the rule`, async () => {
      const options = { ...(await nodeOptions({ demo: { engine: 'builtin' } })), version };
      // A node that starts all the same is closed, or it would hold the test process.
      const outcome = await startRuntimeNode(options).then(
        async (node) => void (await node.close()),
        (error: unknown) => error,
      );
      assert.ok(outcome instanceof SwitchyardError, 'the node started');
      assert.equal(outcome.code, 'invalid_request');
      assert.equal(outcome.message, `version ${JSON.stringify(version)} ${RUNTIME_VERSION_MESSAGE}`);
    });
  }

  for (const version of taken) {
    it(`starts with ${version}`, async () => {
      const node = await startRuntimeNode({ ...(await nodeOptions({ demo: { engine: 'builtin' } })), version });
      try {
        assert.equal((await fetch(`${node.directUrl}/healthz`)).status, 401, 'the direct listener is up');
      } finally {
        await node.close();
      }
    });
  }
});
