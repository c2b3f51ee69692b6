// A runtime answering 503 with `X-Switchyard-Proxy-Error: runtime stream
// limit reached` must not pass for the scheduler proxy refusing a request
// because the runtime's tunnel is full: the gateway then answered its own
// JSON-RPC 503, closed its relay connections to the runtime and warned that
// the runtime carries as many streams as it takes. Through `/api/proxy` the
// scheduler drops that header from the runtime's answer, as it does
// `X-Switchyard-Forwarded`; on a relay connection, which it cannot read, the
// gateway knows that a full tunnel is refused at the upgrade. Either way the
// runtime's 503 reaches the client as it is. A replica, a runtime that
// poses, a gateway.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { RuntimeStateStore, createWatchHandler, type AnyResponse, type RequestHandler } from '@switchyard/agent';
import { systemClock } from '@switchyard/clock';
import { createGateway, type Gateway } from '@switchyard/gateway';
import { PROXY_ERRORS, PROXY_ERROR_HEADER } from '@switchyard/protocol';
import type { SchedulerReplica } from '@switchyard/scheduler';
import { dialTunnel, type TunnelDialer } from '@switchyard/tunnel';
import { IN_PROCESS_TOKEN, startReplicas } from '../support/inprocess.ts';
import { until } from '../support/processes.ts';

const ANSWER = JSON.stringify({ jsonrpc: '2.0', id: 1, error: { code: -32000, message: 'the runtime is busy' } });
const STATELESS = '2026-07-28';

type Log = (fields: object, msg?: string) => void;

function recordingLogger(): { msgs: string[]; debug(): void; info(): void; warn: Log; error: Log } {
  const msgs: string[] = [];
  const log: Log = (_fields, msg = '') => void msgs.push(msg);
  return { msgs, debug() {}, info() {}, warn: log, error: log };
}

describe('a runtime answering 503 with the proxy error of a full tunnel', () => {
  let replicas: SchedulerReplica[] = [];
  let store: RuntimeStateStore;
  let posing: TunnelDialer | undefined;
  let posed = 0;
  const gateways: Array<{ gateway: Gateway; server: http.Server }> = [];

  before(async () => {
    replicas = await startReplicas(1);
    store = new RuntimeStateStore({ clock: systemClock });
    store.setIdleWeight({ sandboxes: 4 });
    const watch = createWatchHandler(store, { clock: systemClock });
    // The same answers through the tunnel (http2 compat objects) and on relay connections (node:http).
    const handler = ((req: http.IncomingMessage, out: AnyResponse) => {
      const res = out as http.ServerResponse;
      if (req.url?.startsWith('/watch')) return void watch(req, res);
      req.resume();
      req.once('end', () => {
        posed++;
        res.writeHead(503, {
          'content-type': 'application/json',
          'retry-after': '1',
          [PROXY_ERROR_HEADER]: PROXY_ERRORS.streamsFull,
        });
        res.end(ANSWER);
      });
    }) as RequestHandler;
    posing = dialTunnel({
      url: replicas[0]!.url,
      token: IN_PROCESS_TOKEN,
      info: { id: 'rt-posing', classes: ['demo'], metadata: {}, version: '1.0.0', limits: { sandboxes: 4 } },
      handler,
      relayHandler: handler,
    });
    await until('the runtime is schedulable', async () => {
      const res = await fetch(`${replicas[0]!.url}/api/schedule`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ class: 'demo', processId: 'probe' }),
      });
      await res.body?.cancel();
      return res.status === 200;
    });
  });

  after(async () => {
    for (const { gateway, server } of gateways) {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
      await gateway.close();
    }
    await posing?.close();
    store?.close();
    await Promise.allSettled(replicas.map((r) => r.close()));
  });

  async function gatewayWith(options: { relayConnections: boolean }): Promise<{ url: string; msgs: string[] }> {
    const logger = recordingLogger();
    const gateway = createGateway({ schedulers: [replicas[0]!.url], defaultClass: 'demo', logger, ...options });
    const server = http.createServer(gateway.app);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    gateways.push({ gateway, server });
    return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/mcp`, msgs: logger.msgs };
  }

  /** A stateless request of a named process: bound to the runtime that holds it. */
  const stateless = (url: string): Promise<Response> =>
    fetch(url, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
        'mcp-protocol-version': STATELESS,
        'x-switchyard-process': 'p1',
      },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list', params: {} }),
    });

  for (const relayConnections of [true, false]) {
    const path = relayConnections ? 'a relay connection' : '/api/proxy';
    it(`reaches the client as the runtime answer it is, through ${path}`, async () => {
      const { url, msgs } = await gatewayWith({ relayConnections });
      const before = posed;
      const res = await stateless(url);
      const body = await res.text();
      assert.equal(posed - before, 1, 'the runtime answered');
      assert.equal(res.status, 503);
      assert.equal(body, ANSWER, "the runtime's answer, not the gateway's for a full tunnel");
      assert.deepEqual(
        msgs.filter((m) => /as many streams/.test(m)),
        [],
      );
    });
  }
});
