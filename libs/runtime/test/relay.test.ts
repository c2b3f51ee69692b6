// A runtime node serving MCP on a relay connection: a real tunnel endpoint
// and relay on a loopback HTTP server stand in for the scheduler, and a raw
// socket speaks HTTP/1.1 on the relayed connection, as a gateway's does.
import assert from 'node:assert/strict';
import { once } from 'node:events';
import http from 'node:http';
import type net from 'node:net';
import { after, before, describe, it } from 'node:test';
import { createTunnelEndpoint, relayConnection } from '@switchyard/tunnel';
import { askRelay, exchangeRaw, type RawAnswer } from '@switchyard/tunnel/testing';
import { startRuntimeNode, type RuntimeNode } from '../src/index.ts';
import { LEGACY, nodeOptions } from './support.ts';

const JOIN_TOKEN = 'join-token-0123456789';

/** One legacy JSON-RPC POST on a relayed socket. */
function exchange(socket: net.Socket, headers: Record<string, string>, body: object): Promise<RawAnswer> {
  const text = JSON.stringify(body);
  const lines = Object.entries({
    host: 'runtime',
    'content-type': 'application/json',
    accept: 'application/json, text/event-stream',
    'mcp-protocol-version': LEGACY,
    'x-switchyard-class': 'demo',
    'content-length': String(Buffer.byteLength(text)),
    ...headers,
  }).map(([name, value]) => `${name}: ${value}\r\n`);
  return exchangeRaw(socket, `POST /mcp HTTP/1.1\r\n${lines.join('')}\r\n${text}`);
}

describe('runtime node on relay connections', () => {
  let node: RuntimeNode;
  let server: http.Server;
  let port = 0;
  const endpoint = createTunnelEndpoint({
    tokens: () => [JOIN_TOKEN],
    maxRuntimes: 1,
    logger: { info() {}, warn() {}, error() {} },
    onTunnel: () => {},
    onTunnelClosed: () => {},
  });

  before(async () => {
    server = http.createServer((_req, res) => res.writeHead(404).end());
    server.on('upgrade', (req, socket, head) => {
      if (req.url === '/relay/rt-test') return relayConnection(endpoint.get('rt-test'), socket, head, 'rt-test');
      endpoint.handleUpgrade(req, socket, head);
    });
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    port = (server.address() as net.AddressInfo).port;
    node = await startRuntimeNode({
      ...(await nodeOptions({ demo: { engine: 'builtin' } })),
      schedulerUrl: `http://127.0.0.1:${port}`,
    });
    await node.whenConnected();
  });
  after(async () => {
    await node.close();
    endpoint.close();
    server.closeAllConnections();
    server.close();
  });

  it('serves legacy sessions, answers without a body included, on one relayed connection', async () => {
    const { status, socket } = await askRelay(port, '/relay/rt-test');
    assert.equal(status, 101);
    try {
      for (let i = 0; i < 3; i++) {
        const init = await exchange(
          socket,
          {},
          {
            jsonrpc: '2.0',
            id: 1,
            method: 'initialize',
            params: { protocolVersion: LEGACY, capabilities: {}, clientInfo: { name: 'relay-test', version: '1' } },
          },
        );
        assert.equal(init.status, 200, init.head);
        const session = /mcp-session-id: (\S+)/i.exec(init.head)?.[1];
        assert.ok(session, init.head);
        const withSession = { 'mcp-session-id': session };
        // A 202 without a body: Node's HTTP/1.1 server writes its head as a string.
        const initialized = await exchange(socket, withSession, {
          jsonrpc: '2.0',
          method: 'notifications/initialized',
        });
        assert.match(initialized.head, /^HTTP\/1\.1 202 Accepted\r\n/);
        const echo = await exchange(socket, withSession, {
          jsonrpc: '2.0',
          id: 2,
          method: 'tools/call',
          params: { name: 'echo', arguments: { text: `call ${i}` } },
        });
        assert.equal(echo.status, 200, echo.head);
        assert.match(echo.body, new RegExp(`call ${i}`));
      }
    } finally {
      socket.destroy();
    }
  });
});
