import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { childPids } from './fixtures/children.ts';
import { connect } from './fixtures/clients.ts';
import { RecordingReporter, serveHttp1, testHost } from './fixtures/harness.ts';

const tinyServer = new URL('./fixtures/tiny-stdio-server.ts', import.meta.url).pathname;

describe('host close', () => {
  it('is idempotent, ends sessions, removes sandboxes, kills children and refuses new work', async () => {
    const reporter = new RecordingReporter();
    const host = testHost({
      runtimeId: 'rt-close',
      classes: { tiny: { engine: 'stdio', command: process.execPath, args: [tinyServer], warmPool: 1 } },
      sandboxesMax: 5,
      reporter,
    });
    const served = await serveHttp1(host);
    const c = await connect('v2-legacy', served.url, served.fetch, {
      'x-switchyard-class': 'tiny',
      'x-switchyard-process': 'closing',
    });
    assert.equal(await c.callText('echo', { text: 'x' }), 'x');
    assert.equal(host.stats().sessions, 1);

    await Promise.all([host.close(), host.close()]);
    await host.close();
    assert.deepEqual(host.stats(), { sandboxes: 0, sessions: 0, cancelled: 0, warm: 0 });
    assert.equal(reporter.processes.size, 0);
    assert.equal(reporter.threads.size, 0);
    assert.deepEqual(childPids(), []);
    const res = await fetch(`${served.url}/mcp`, { method: 'POST', body: '{}' });
    assert.equal(res.status, 503);
    await res.body?.cancel();
    await c.close().catch(() => undefined);
    await served.close();
  });
});
