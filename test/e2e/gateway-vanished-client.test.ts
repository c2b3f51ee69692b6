// An MCP client whose host vanishes (powered off, partitioned: no FIN, no
// RST) while the gateway binary streams an SSE answer to it. HTTP/1.1 has no
// ping; once the kernel's buffers are full the gateway's writes wait for
// acknowledgements that never come, and TCP keepalive does not probe
// meanwhile: only the kernel's retransmission timeout (about 15 minutes)
// would end the connection, and with it the scheduler's stream and the
// runtime's behind it. The gateway closes a client connection whose writes
// have waited writeStallTimeoutMs with no byte taken, which cancels the
// stream upstream. The client reaches the gateway through a TCP relay that
// can stop carrying bytes both ways without closing; the runtime is a
// stand-in in this process that streams as fast as it is read.
import assert from 'node:assert/strict';
import type http from 'node:http';
import net from 'node:net';
import { after, before, describe, it } from 'node:test';
import { RuntimeStateStore, createWatchHandler, type AnyResponse, type RequestHandler } from '@switchyard/agent';
import { systemClock } from '@switchyard/clock';
import type { SchedulerReplica } from '@switchyard/scheduler';
import { freezableRelay } from '@switchyard/service/testing';
import { dialTunnel, type TunnelDialer } from '@switchyard/tunnel';
import { IN_PROCESS_TOKEN, startReplicas } from '../support/inprocess.ts';
import { spawnApp, until, type AppProcess } from '../support/processes.ts';
import { MODERN, untilSchedulable } from './support.ts';

/** Short, for a test in real time; far above what a loopback reader that is there takes to make room. */
const WRITE_STALL_TIMEOUT_MS = 1000;
const EVENT = `event: message\ndata: {"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"${'x'.repeat(900)}"}}\n\n`;

describe('a client that vanishes while the gateway streams an SSE answer to it', () => {
  let replicas: SchedulerReplica[] = [];
  let standIn: TunnelDialer | undefined;
  let gateway: AppProcess | undefined;
  const store = new RuntimeStateStore({ clock: systemClock });
  /** The stand-in runtime's answers still open. */
  let answersOpen = 0;

  before(async () => {
    replicas = await startReplicas(1);
    store.setIdleWeight({ sandboxes: 4 });
    const watch = createWatchHandler(store, { clock: systemClock });
    const handler = ((req: http.IncomingMessage, out: AnyResponse) => {
      const res = out as http.ServerResponse;
      if (req.url?.startsWith('/watch')) return void watch(req, res);
      req.resume();
      answersOpen++;
      res.once('close', () => answersOpen--);
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      const pump = (): void => {
        while (!res.destroyed && res.write(EVENT));
        if (!res.destroyed) res.once('drain', pump);
      };
      pump();
    }) as RequestHandler;
    standIn = dialTunnel({
      url: replicas[0]!.url,
      token: IN_PROCESS_TOKEN,
      info: { id: 'rt-flood', classes: ['demo'], metadata: {}, version: '1.0.0', limits: { sandboxes: 4 } },
      handler,
      relayHandler: handler,
    });
    await untilSchedulable(replicas[0]!.url, 'the stand-in runtime is schedulable');
    gateway = await spawnApp('gateway', 'gw-vanished-client', [
      ...['--host', '127.0.0.1', '--port', '0', '--default-class', 'demo', '--drain-delay-ms', '0'],
      ...['--schedulers', replicas[0]!.url, '--write-stall-timeout-ms', String(WRITE_STALL_TIMEOUT_MS)],
    ]);
  });
  after(async () => {
    await gateway?.stop();
    await standIn?.close();
    store.close();
    await Promise.allSettled(replicas.map((r) => r.close()));
  });

  it("has its connection closed once the writes wait writeStallTimeoutMs, and the runtime's answer behind it", async () => {
    const relay = await freezableRelay(gateway!.port!);
    const client = net.connect(relay.port, '127.0.0.1');
    client.on('error', () => {});
    try {
      let received = 0;
      client.on('data', (chunk: Buffer) => (received += chunk.length));
      const body = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list', params: {} });
      client.write(
        [
          'POST /mcp HTTP/1.1',
          'Host: 127.0.0.1',
          'Content-Type: application/json',
          'Accept: application/json, text/event-stream',
          `Mcp-Protocol-Version: ${MODERN}`,
          'Mcp-Method: tools/list',
          'X-Switchyard-Process: p-vanish',
          `Content-Length: ${Buffer.byteLength(body)}`,
          '',
          body,
        ].join('\r\n'),
      );
      await until('the answer to stream', () => received > 1024 * 1024 || undefined);
      assert.equal(answersOpen, 1);

      relay.freeze();
      const frozenAt = performance.now();
      await until(
        'the runtime answer behind the frozen connection to end',
        () => answersOpen === 0 || undefined,
        15_000,
      );
      const tookMs = performance.now() - frozenAt;
      assert.ok(tookMs < 10_000, `ended ${tookMs} ms after the freeze (bound ${WRITE_STALL_TIMEOUT_MS} ms)`);
      const metrics = await (await fetch(`http://127.0.0.1:${gateway!.port}/metrics`)).text();
      assert.match(metrics, /^switchyard_gateway_connections_write_stalled_total 1$/m);
    } finally {
      client.destroy();
      relay.close();
    }
  });
});
