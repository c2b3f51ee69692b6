// A gateway whose host vanishes (powered off, partitioned: no FIN, no RST)
// while it holds event streams on an HTTP/2 connection here. Those streams
// carry a keep-alive comment every 15 s, so TCP keepalive never probes, and
// only the kernel's retransmission timeout (about 15 minutes) would end the
// connection. The replica pings each gateway connection instead: one that
// leaves a ping unanswered is destroyed, its streams reset, and so the
// runtime's streams behind them. The gateway reaches the replica through a
// TCP relay here that can stop carrying bytes both ways without closing.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { once } from 'node:events';
import http2 from 'node:http2';
import type { RuntimeNode } from '@switchyard/runtime';
import { MemoryLeaseStore } from '@switchyard/election';
import { freezableRelay } from '@switchyard/service/testing';
import type { SchedulerReplica } from '@switchyard/scheduler';
import { quietLogger, startReplicas, startRuntime, until } from './support.ts';

const PING_INTERVAL_MS = 100;
/** Generous beside a loopback round trip, so a busy machine does not miss an answer. */
const PING_TIMEOUT_MS = 1000;

describe('a gateway that vanishes while it holds event streams over HTTP/2', () => {
  let replica: SchedulerReplica;
  let runtime: RuntimeNode;

  before(async () => {
    const replicas = await startReplicas(1, new MemoryLeaseStore(), quietLogger, {
      gatewayPingIntervalMs: PING_INTERVAL_MS,
      gatewayPingTimeoutMs: PING_TIMEOUT_MS,
    });
    replica = replicas[0]!;
    runtime = await startRuntime('r1', replica.url);
    await until('the tunnel of r1', async () => {
      const res = await fetch(`${replica.url}/api/proxy/r1/healthz`);
      await res.body?.cancel();
      return res.status === 200 || undefined;
    });
  });
  after(async () => {
    await runtime?.close();
    await replica?.close();
  });

  const mcp = (): string => `${replica.url}/api/proxy/r1/mcp`;
  const legacy = {
    'content-type': 'application/json',
    accept: 'application/json, text/event-stream',
    'x-switchyard-class': 'demo',
    'x-switchyard-process': 'p-vanish',
    'mcp-protocol-version': '2025-11-25',
  };
  /** The value of one of the replica's metrics without labels, NaN when it has none. */
  const metric = async (name: string): Promise<number> => {
    const text = await (await fetch(`${replica.url}/metrics`)).text();
    return Number(new RegExp(`^switchyard_scheduler_${name} (\\d+)$`, 'm').exec(text)?.[1]);
  };
  const busiest = (): Promise<number> => metric('tunnel_streams_busiest');
  const unanswered = (): Promise<number> => metric('gateway_connections_unanswered_total');
  /** Event streams the runtime is answering, from its own /metrics through the replica. */
  const runtimeStreams = async (): Promise<number> => {
    const text = await (await fetch(`${replica.url}/api/proxy/r1/metrics`)).text();
    return Number(/^switchyard_runtime_event_streams (\d+)$/m.exec(text)?.[1]);
  };

  it('has its connection closed within a ping interval and timeout, and counted, and the runtime its stream', async () => {
    const init = await fetch(mcp(), {
      method: 'POST',
      headers: legacy,
      body: JSON.stringify({
        jsonrpc: '2.0',
        id: 1,
        method: 'initialize',
        params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 't', version: '1' } },
      }),
    });
    assert.equal(init.status, 200, init.status === 200 ? '' : await init.text());
    await init.text();
    const session = init.headers.get('mcp-session-id')!;
    const before = await busiest();
    const streamsBefore = await runtimeStreams();

    const relay = await freezableRelay(replica.port);
    const gateway = http2.connect(relay.url);
    gateway.on('error', () => {});
    try {
      const stream = gateway.request({
        ':path': '/api/proxy/r1/mcp',
        ...legacy,
        'mcp-session-id': session,
        accept: 'text/event-stream',
      });
      stream.on('error', () => {});
      const [head] = (await once(stream, 'response')) as [http2.IncomingHttpHeaders];
      assert.equal(head[':status'], 200);
      assert.equal(await busiest(), before + 1, 'the event stream holds a stream of the tunnel');
      assert.equal(await runtimeStreams(), streamsBefore + 1, 'the runtime answers the stream');

      // Answered pings keep a silent stream: several rounds pass.
      await new Promise((r) => setTimeout(r, 4 * (PING_INTERVAL_MS + PING_TIMEOUT_MS)));
      assert.equal(await busiest(), before + 1, 'a connection that answers its pings is kept');
      assert.equal(await unanswered(), 0, 'no connection is counted as unanswered yet');

      relay.freeze();
      const frozenAt = performance.now();
      await until('the tunnel stream behind the frozen connection to close', async () =>
        (await busiest()) === before ? true : undefined,
      );
      const tookMs = performance.now() - frozenAt;
      assert.ok(tookMs < 5000, `closed ${tookMs} ms after the freeze (interval ${PING_INTERVAL_MS} ms)`);
      assert.equal(await unanswered(), 1, 'the connection closed for its unanswered ping is counted');
      await until('the runtime to let the stream go', async () =>
        (await runtimeStreams()) === streamsBefore ? true : undefined,
      );
    } finally {
      gateway.destroy();
      relay.close();
    }
  });
});
