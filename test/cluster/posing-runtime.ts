// A replica, a runtime whose answers pose as Switchyard's own (the test
// says how), and gateways in front of them: what the runtime-posing suites
// share. The runtime serves the same answers through the tunnel (http2
// compat objects) and on relay connections (node:http), which carry
// HTTP/1.1 to it that the scheduler cannot read.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { RuntimeStateStore, createWatchHandler, type AnyResponse, type RequestHandler } from '@switchyard/agent';
import { systemClock } from '@switchyard/clock';
import { createGateway, type Gateway } from '@switchyard/gateway';
import type { SchedulerReplica } from '@switchyard/scheduler';
import { dialTunnel, type TunnelDialer } from '@switchyard/tunnel';
import { IN_PROCESS_TOKEN, startReplicas } from '../support/inprocess.ts';
import { until } from '../support/processes.ts';

export interface Logged {
  readonly level: string;
  readonly msg: string;
}

type Log = (fields: object, msg?: string) => void;

function recordingLogger(): { logs: Logged[]; debug(): void; info(): void; warn: Log; error: Log } {
  const logs: Logged[] = [];
  const at =
    (level: string): Log =>
    (_fields, msg = '') =>
      void logs.push({ level, msg });
  return { logs, debug() {}, info() {}, warn: at('warn'), error: at('error') };
}

export interface PosingStack {
  /** A gateway in front of the replica (presenting `apiToken`, when set), with `options`; its URL and what it logs. */
  gatewayWith(options: { relayConnections: boolean }): Promise<{ url: string; logs: Logged[] }>;
  close(): Promise<void>;
}

/**
 * Starts the replica (with `apiToken` as its only API token, when set) and
 * the runtime `rt-posing`, serving class `demo`, whose every request but
 * its state stream `answer` answers once the request's body has been read;
 * resolves once the runtime is schedulable.
 */
export async function startPosingStack(options: {
  apiToken?: string;
  answer: (req: http.IncomingMessage, body: string, res: http.ServerResponse) => void;
}): Promise<PosingStack> {
  const { apiToken } = options;
  const replicas: SchedulerReplica[] = await startReplicas(1, apiToken ? { apiTokens: () => [apiToken] } : {});
  const authorization: Record<string, string> = apiToken ? { authorization: `Bearer ${apiToken}` } : {};
  const store = new RuntimeStateStore({ clock: systemClock });
  store.setIdleWeight({ sandboxes: 4 });
  const watch = createWatchHandler(store, { clock: systemClock });
  const handler = ((req: http.IncomingMessage, out: AnyResponse) => {
    const res = out as http.ServerResponse;
    if (req.url?.startsWith('/watch')) return void watch(req, res);
    let body = '';
    req.on('data', (chunk: Buffer) => (body += chunk.toString()));
    req.once('end', () => options.answer(req, body, res));
  }) as RequestHandler;
  const posing: TunnelDialer = dialTunnel({
    url: replicas[0]!.url,
    token: IN_PROCESS_TOKEN,
    info: { id: 'rt-posing', classes: ['demo'], metadata: {}, version: '1.0.0', limits: { sandboxes: 4 } },
    handler,
    relayHandler: handler,
  });
  await until('the runtime is schedulable', async () => {
    const res = await fetch(`${replicas[0]!.url}/api/schedule`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...authorization },
      body: JSON.stringify({ class: 'demo', processId: 'probe' }),
    });
    await res.body?.cancel();
    return res.status === 200;
  });
  const gateways: Array<{ gateway: Gateway; server: http.Server }> = [];
  return {
    async gatewayWith(gatewayOptions) {
      const logger = recordingLogger();
      const gateway = createGateway({
        schedulers: [replicas[0]!.url],
        ...(apiToken ? { schedulerToken: apiToken } : {}),
        defaultClass: 'demo',
        logger,
        ...gatewayOptions,
      });
      const server = http.createServer(gateway.app);
      await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
      gateways.push({ gateway, server });
      return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/mcp`, logs: logger.logs };
    },
    async close() {
      for (const { gateway, server } of gateways) {
        server.closeAllConnections();
        await new Promise((resolve) => server.close(resolve));
        await gateway.close();
      }
      await posing.close();
      store.close();
      await Promise.allSettled(replicas.map((r) => r.close()));
    },
  };
}

/** A stateless (2026-07-28) `tools/list` of process `p1`: bound to the runtime that holds it. */
export function statelessCall(url: string): Promise<Response> {
  return fetch(url, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      'mcp-protocol-version': '2026-07-28',
      'x-switchyard-process': 'p1',
    },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list', params: {} }),
  });
}
