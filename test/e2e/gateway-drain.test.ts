// Acceptance at the process level: a gateway stopped with SIGTERM ends the
// event streams (`GET /mcp`) it carries once its listener stops accepting, so
// their clients open them again (with Last-Event-ID) on another replica,
// rather than hold them on a gateway that is going away until its shutdown
// deadline (30 s) cuts them. A tool call in flight is still answered. A
// connection that has sent nothing (a load balancer's pre-opened one, a
// browser's preconnect) does not hold the exit either.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import { startCluster, type TestCluster } from '../support/cluster.ts';
import { LEGACY, initializeBody, post, toolCallBody } from './support.ts';

/** A tool call still running when the gateway is told to stop. */
const SLEEP_MS = 1500;

describe('a gateway stopped with SIGTERM while it carries event streams', () => {
  let cluster: TestCluster;
  before(async () => {
    cluster = await startCluster({ schedulers: 1, runtimes: 1 });
  });
  after(async () => {
    await cluster.stop();
  });

  it('ends them at once, lets a tool call in flight finish, and exits without waiting for its deadline', async () => {
    const silent = net.connect(Number(new URL(cluster.gatewayUrl()).port), '127.0.0.1');
    silent.on('error', () => {});
    silent.resume();
    await new Promise<void>((resolve) => silent.once('connect', () => resolve()));
    const url = cluster.gatewayUrl();
    const init = await post(url, initializeBody());
    assert.equal(init.status, 200, init.text);
    const session = { 'mcp-session-id': init.headers.get('mcp-session-id')!, 'mcp-protocol-version': LEGACY };
    const initialized = await post(url, { jsonrpc: '2.0', method: 'notifications/initialized' }, session);
    assert.equal(initialized.status, 202);
    const stream = await fetch(url, { headers: { ...session, accept: 'text/event-stream' } });
    assert.equal(stream.status, 200);
    const reader = stream.body!.getReader();
    const streamEnded = (async () => {
      // Bounded: the gateway's shutdown deadline cuts the stream at the latest.
      try {
        for (;;) if ((await reader.read()).done) return { at: performance.now(), cut: undefined };
      } catch (error) {
        return { at: performance.now(), cut: String(error) };
      }
    })();
    const call = await fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...session },
      body: JSON.stringify(toolCallBody(2, 'sleep', { ms: SLEEP_MS })),
    });
    assert.equal(call.status, 200);

    const gateway = cluster.gateways[0]!;
    const stoppedAt = performance.now();
    gateway.signal('SIGTERM');
    const ended = await streamEnded;
    assert.ok(ended.at - stoppedAt < 2000, `the event stream ended ${ended.at - stoppedAt} ms after SIGTERM`);
    assert.equal(ended.cut, undefined, 'the event stream ended whole, not cut');
    assert.match(await call.text(), new RegExp(`slept ${SLEEP_MS}`), 'the tool call in flight was answered');
    await gateway.exited;
    const exitedMs = performance.now() - stoppedAt;
    assert.ok(exitedMs < SLEEP_MS + 5000, `the gateway exited ${exitedMs} ms after SIGTERM`);
    silent.destroy();
  });
});
