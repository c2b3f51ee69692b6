import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { once } from 'node:events';
import net from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { startCluster, type TestCluster } from '../support/cluster.ts';
import { initializeBody, post } from './support.ts';

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

  it('answers a class no runtime serves 503 unschedulable, saying why, with a Retry-After of 10 s', async () => {
    const res = await post(cluster.gatewayUrl(), initializeBody(2), { 'x-switchyard-class': 'nobody-serves-this' });
    assert.equal(res.status, 503);
    // Not the 1 s of a busy fleet: it passes only when a runtime of the class joins.
    assert.equal(res.headers.get('retry-after'), '10');
    const { error } = JSON.parse(res.text) as { error: { message: string; data: { reason: string } } };
    assert.equal(error.data.reason, 'unschedulable');
    assert.match(error.message, /^No runtime can serve this request: /);
  });

  it("keeps an idle client connection open longer than a load balancer in front does, not Node's 5 s", async () => {
    const { port } = new URL(cluster.gatewayUrl());
    const socket = net.connect(Number(port), '127.0.0.1');
    await once(socket, 'connect');
    let received = '';
    let closed = false;
    socket.on('data', (chunk: Buffer) => (received += chunk.toString()));
    socket.on('close', () => (closed = true));
    const ask = async (): Promise<string> => {
      received = '';
      socket.write(`GET /healthz HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\n\r\n`);
      for (let waited = 0; !/\r\n\r\n[\s\S]*ok/.test(received) && !closed && waited < 5000; waited += 20) {
        await sleep(20);
      }
      return received;
    };
    try {
      const first = await ask();
      assert.match(first, /^HTTP\/1\.1 200 /);
      // Clients that read it close sooner; a load balancer, which does not, finds the connection open.
      assert.match(first, /^keep-alive: timeout=5\r$/im);
      await sleep(7500);
      assert.equal(closed, false, 'the gateway closed the idle connection');
      assert.match(await ask(), /^HTTP\/1\.1 200 /, 'a second request on the same connection');
    } finally {
      socket.destroy();
    }
  });

  it('has schedulers keep an idle connection far longer than a gateway does (65 s against 4 s)', async () => {
    const res = await fetch(`${cluster.schedulers[0]!.url!}/healthz`);
    await res.body?.cancel();
    assert.equal(res.headers.get('keep-alive'), 'timeout=65');
  });
});
