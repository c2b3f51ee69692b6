// A runtime answering a gateway's request with 401 and the scheduler's own
// challenge (`WWW-Authenticate: Bearer realm="switchyard-scheduler"`) must
// not pass for the scheduler refusing the gateway's API token: the gateway
// then answered 502 and logged, at error level, that its token was refused,
// sending operators after the wrong cause. Through `/api/proxy` (HTTP/1.1,
// and HTTP/2 for event streams) the scheduler drops that challenge from the
// runtime's answer; on a relay connection, which it cannot read, the
// gateway knows the scheduler said its part at the upgrade. Either way the
// runtime's 401 reaches the client as a sandbox's would. A replica with API
// tokens, a runtime that poses, a gateway presenting the right token.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { RuntimeStateStore, createWatchHandler, type AnyResponse, type RequestHandler } from '@switchyard/agent';
import { systemClock } from '@switchyard/clock';
import { createGateway, type Gateway } from '@switchyard/gateway';
import { SCHEDULER_API_REALM } from '@switchyard/protocol';
import type { SchedulerReplica } from '@switchyard/scheduler';
import { dialTunnel, type TunnelDialer } from '@switchyard/tunnel';
import { IN_PROCESS_TOKEN, startReplicas } from '../support/inprocess.ts';
import { until } from '../support/processes.ts';

const API_TOKEN = 'api-token-0123456789abcdef';
const POSING = `Bearer realm="${SCHEDULER_API_REALM}"`;
const LEGACY = '2025-11-25';
const STATELESS = '2026-07-28';

interface Logged {
  readonly level: string;
  readonly msg: string;
}

function recordingLogger(): { logs: Logged[]; debug(): void; info(): void; warn: Log; error: Log } {
  const logs: Logged[] = [];
  const at =
    (level: string): Log =>
    (_fields, msg = '') =>
      void logs.push({ level, msg });
  return { logs, debug() {}, info() {}, warn: at('warn'), error: at('error') };
}
type Log = (fields: object, msg?: string) => void;

describe('a runtime answering 401 with the scheduler realm', () => {
  let replicas: SchedulerReplica[] = [];
  let store: RuntimeStateStore;
  let posing: TunnelDialer | undefined;
  /** `<method> <path>` of each request the runtime answered with the scheduler's challenge. */
  const posed: string[] = [];
  const gateways: Array<{ gateway: Gateway; server: http.Server }> = [];

  before(async () => {
    replicas = await startReplicas(1, { apiTokens: () => [API_TOKEN] });
    store = new RuntimeStateStore({ clock: systemClock });
    store.setIdleWeight({ sandboxes: 4 });
    const watch = createWatchHandler(store, { clock: systemClock });
    // The same answers through the tunnel (http2 compat objects) and on relay connections (node:http).
    const handler = ((req: http.IncomingMessage, out: AnyResponse) => {
      const res = out as http.ServerResponse;
      if (req.url?.startsWith('/watch')) return void watch(req, res);
      let body = '';
      req.on('data', (chunk: Buffer) => (body += chunk.toString()));
      req.once('end', () => {
        if (body.includes('"initialize"')) {
          // A legacy session, so that its event stream can be asked for.
          const session = String(req.headers['x-switchyard-session-id']);
          const result = { protocolVersion: LEGACY, capabilities: {}, serverInfo: { name: 'posing', version: '1' } };
          res.writeHead(200, { 'content-type': 'application/json', 'mcp-session-id': session });
          return void res.end(JSON.stringify({ jsonrpc: '2.0', id: 1, result }));
        }
        posed.push(`${req.method} ${req.url}`);
        res.writeHead(401, { 'content-type': 'application/json', 'www-authenticate': POSING });
        res.end(JSON.stringify({ error: 'missing or invalid API token', code: 'unauthorized' }));
      });
    }) as RequestHandler;
    posing = dialTunnel({
      url: replicas[0]!.url,
      token: IN_PROCESS_TOKEN,
      info: { id: 'rt-posing', classes: ['demo'], metadata: {}, version: '1.0.0', limits: { sandboxes: 4 } },
      handler,
      // Relay connections carry HTTP/1.1 to the runtime, which the scheduler cannot read.
      relayHandler: handler,
    });
    await until('the runtime is schedulable', async () => {
      const res = await fetch(`${replicas[0]!.url}/api/schedule`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${API_TOKEN}` },
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

  /** A gateway presenting the right API token, with `options`; its URL and what it logs. */
  async function gatewayWith(options: { relayConnections: boolean }): Promise<{ url: string; logs: Logged[] }> {
    const logger = recordingLogger();
    const gateway = createGateway({
      schedulers: [replicas[0]!.url],
      schedulerToken: API_TOKEN,
      defaultClass: 'demo',
      logger,
      ...options,
    });
    const server = http.createServer(gateway.app);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    gateways.push({ gateway, server });
    return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/mcp`, logs: logger.logs };
  }

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

  /** What the gateway logged that blames a token. */
  const blamed = (logs: readonly Logged[]): Logged[] => logs.filter((l) => /refused this gateway/.test(l.msg));

  it('reaches the client as the runtime answer it is, through a relay connection', async () => {
    const { url, logs } = await gatewayWith({ relayConnections: true });
    const before = posed.length;
    const res = await stateless(url);
    await res.arrayBuffer();
    assert.deepEqual(posed.slice(before), ['POST /mcp'], 'the runtime answered');
    assert.equal(res.status, 401, 'the runtime answer, not a 502');
    assert.deepEqual(blamed(logs), []);
  });

  it('reaches the client through /api/proxy, without the challenge the scheduler alone gives', async () => {
    const { url, logs } = await gatewayWith({ relayConnections: false });
    const before = posed.length;
    const res = await stateless(url);
    await res.arrayBuffer();
    assert.deepEqual(posed.slice(before), ['POST /mcp'], 'the runtime answered');
    assert.equal(res.status, 401, 'the runtime answer, not a 502');
    assert.equal(res.headers.get('www-authenticate'), null);
    assert.deepEqual(blamed(logs), []);
  });

  it('reaches the client on an event stream over HTTP/2, without that challenge', async () => {
    const { url, logs } = await gatewayWith({ relayConnections: true });
    const init = await fetch(url, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
        'mcp-protocol-version': LEGACY,
      },
      body: JSON.stringify({
        jsonrpc: '2.0',
        id: 1,
        method: 'initialize',
        params: { protocolVersion: LEGACY, capabilities: {}, clientInfo: { name: 'realm-test', version: '1' } },
      }),
    });
    await init.arrayBuffer();
    assert.equal(init.status, 200);
    const session = init.headers.get('mcp-session-id');
    assert.ok(session, 'a session');
    const before = posed.length;
    const res = await fetch(url, {
      headers: { accept: 'text/event-stream', 'mcp-protocol-version': LEGACY, 'mcp-session-id': session },
    });
    await res.arrayBuffer();
    assert.deepEqual(posed.slice(before), ['GET /mcp'], 'the runtime answered');
    assert.equal(res.status, 401, 'the runtime answer, not a 502');
    assert.equal(res.headers.get('www-authenticate'), null);
    assert.deepEqual(blamed(logs), []);
  });
});
