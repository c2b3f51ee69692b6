// A runtime's metering sink, as an operator picks it: by default (no Redis)
// each sandbox start and recycle is an info line (event: metering);
// metering.sink none drops them; with a Redis URL they wait for Redis, up to
// metering.queueLengthMax. Runtime processes whose scheduler is never
// reached; a session opened on the direct listener starts a sandbox, and the
// runtime's shutdown recycles it.
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { spawnApp, type AppProcess } from '../support/processes.ts';
import { LEGACY, initializeBody, post } from './support.ts';

const DIRECT_TOKEN = 'a-direct-token-0123456789abcdef';

/** Starts a runtime with `args`, opens one session (one sandbox) on its direct listener, stops it; its log lines. */
async function sessionThenStop(name: string, args: readonly string[], started: AppProcess[]) {
  const runtime = await spawnApp('runtime', name, [
    ...['--runtime-id', name, '--scheduler-url', 'http://127.0.0.1:9'],
    ...['--join-token', 'a-join-token-0123456789abcdef', '--drain-delay-ms', '0'],
    ...['--direct-listen.enabled', 'true', '--direct-listen.host', '127.0.0.1', '--direct-listen.port', '0'],
    ...['--direct-listen.token', DIRECT_TOKEN, ...args],
  ]);
  started.push(runtime);
  const ready = await runtime.waitForLog((l) => l.msg === 'ready');
  const reply = await post(`${String(ready.direct)}/mcp`, initializeBody(), {
    authorization: `Bearer ${DIRECT_TOKEN}`,
    'mcp-protocol-version': LEGACY,
    'x-switchyard-class': 'demo',
  });
  assert.equal(reply.status, 200, reply.text);
  assert.ok(reply.headers.get('mcp-session-id'), 'no session opened');
  // The shutdown recycles the sandbox; every line is read once the process has exited.
  await runtime.stop();
  return runtime.logs;
}

describe('a runtime metering sink', () => {
  const started: AppProcess[] = [];
  after(() => Promise.all(started.map((r) => r.stop())));

  it('logs each sandbox start and recycle at info by default', async () => {
    const logs = await sessionThenStop('metered', [], started);
    const metering = logs.filter((l) => l.event === 'metering');
    assert.deepEqual(
      metering.map((l) => [l.lifecycle, l.class, l.reason, l.level]),
      [
        ['start', 'demo', 'created', 30],
        // The session named no process: the sandbox was its own, and ended with it as the runtime stopped.
        ['recycle', 'demo', 'ended', 30],
      ],
    );
  });

  it('writes none of them with metering.sink none, nor anything else in their place', async () => {
    const logs = await sessionThenStop('unmetered', ['--metering.sink', 'none'], started);
    // Logged once the sandboxes are gone, after where the recycle line would be: the log was read that far.
    const said = logs.map((l) => String(l.msg));
    assert.ok(said.includes('stopped'), said.join(' | '));
    assert.deepEqual(
      logs.filter((l) => l.event === 'metering' || String(l.msg).startsWith('sandbox ')),
      [],
    );
  });

  it('holds at most metering.queueLengthMax events for a Redis away, and counts what it drops and leaves', async () => {
    const logs = await sessionThenStop(
      'queued',
      ['--metering.redis-url', 'redis://127.0.0.1:1', '--metering.queue-length-max', '1'],
      started,
    );
    // The start waited for Redis; the recycle made room for itself by dropping it.
    const dropped = logs.filter((l) => l.event === 'metering.queue_full');
    assert.deepEqual(
      dropped.map((l) => l.dropped),
      [1],
    );
    // Shutdown waited its 2 s for Redis, then left the recycle unwritten.
    const abandoned = logs.filter((l) => l.event === 'metering.close_abandoned');
    assert.deepEqual(
      abandoned.map((l) => l.unwritten),
      [1],
    );
  });
});
