import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { startCluster, type TestCluster } from '../support/cluster.ts';

describe('cluster of processes (smoke)', () => {
  let cluster: TestCluster;
  before(async () => {
    cluster = await startCluster();
  });
  after(() => cluster?.stop());

  it('elects one leader and serves /mcp through the gateway', async () => {
    const leader = await cluster.leader();
    assert.ok(leader.url);
    const res = await fetch(cluster.gatewayUrl(), {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
      body: JSON.stringify({
        jsonrpc: '2.0',
        id: 1,
        method: 'initialize',
        params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 't', version: '1' } },
      }),
    });
    assert.equal(res.status, 200);
    assert.ok(res.headers.get('mcp-session-id'));
    assert.match(await res.text(), /switchyard-sandbox/);
  });
});
