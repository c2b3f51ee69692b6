// An http class whose MCP server listens on a port that Node's fetch refuses (6000, 6665-6669, 10080, …: the
// ports browsers block), which is a legitimate place for one: the engine must open its session there, call
// its tools and stream their progress. The server is a second host's demo class, served on
// the first such port free on this machine (with none free, the test is skipped saying so).
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Client } from '@modelcontextprotocol/client';
import type { SandboxHost } from '@switchyard/sandbox';
import { FETCH_BLOCKED_PORTS, onBlockedPort } from '@switchyard/service/testing';
import { connect } from './fixtures/clients.ts';
import { RecordingReporter, remoteDemo, serveHttp1, type Served, testHost } from './fixtures/harness.ts';

describe('an http class whose server is on a port that fetch refuses', () => {
  const upstream = testHost({ runtimeId: 'rt-up', classes: { demo: { engine: 'builtin' } } });
  const reporter = new RecordingReporter();
  let upstreamServed: Served | undefined;
  let host: SandboxHost | undefined;
  let served: Served | undefined;

  before(async () => {
    upstreamServed = (await onBlockedPort((port) => serveHttp1(upstream, port)))?.started;
    if (!upstreamServed) return;
    host = testHost({ runtimeId: 'rt-1', reporter, classes: { remote: remoteDemo(`${upstreamServed.url}/mcp`) } });
    served = await serveHttp1(host);
  });
  after(async () => {
    await served?.close();
    await host?.close();
    await upstreamServed?.close();
    await upstream.close();
  });

  it("opens a session there and calls the server's tools, with their progress", async (t) => {
    if (!served || !host)
      return void t.skip(`every port of ${FETCH_BLOCKED_PORTS.join(', ')} is taken on this machine`);
    const c = await connect('v2-legacy', served.url, served.fetch, { 'x-switchyard-class': 'remote' });
    try {
      assert.equal(await c.callText('echo', { text: 'hi' }), 'hi');
      let progress = 0;
      await (c.raw as Client).callTool(
        { name: 'sleep', arguments: { ms: 250 } },
        { onprogress: () => void progress++ },
      );
      assert.ok(progress >= 1, `${progress} progress notifications`);
      assert.equal(upstream.stats().sessions, 1, 'one upstream session, the sandbox');
    } finally {
      await c.close();
    }
  });
});
