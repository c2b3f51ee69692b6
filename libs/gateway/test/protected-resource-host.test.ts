// Auth mode jwt without `auth.resource` builds the resource from each
// request's Host. A Host the pattern lets through but that is no valid URL
// authority (a port past 65535, an IPv4 address out of range) must not throw
// out of the request listener (an uncaught exception ends the process) nor
// turn a 401 into a 500.
import { createServer, type Server } from 'node:http';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createGateway } from '@switchyard/gateway';
import type { Gateway } from '@switchyard/gateway';

function get(port: number, path: string, host: string): Promise<{ status: number; headers: http.IncomingHttpHeaders }> {
  return new Promise((resolve, reject) => {
    const req = http.request(
      {
        host: '127.0.0.1',
        port,
        path,
        method: path === '/mcp' ? 'POST' : 'GET',
        agent: false,
        setHost: false,
        headers: { host, 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
      },
      (res) => {
        res.resume();
        res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers }));
      },
    );
    req.on('error', reject);
    req.end(path === '/mcp' ? '{"jsonrpc":"2.0","id":1,"method":"tools/list"}' : undefined);
  });
}

describe('protected resource metadata for a Host that is no URL authority', () => {
  let gateway: Gateway;
  let server: Server;
  let port: number;
  const thrown: unknown[] = [];
  before(async () => {
    gateway = createGateway({
      schedulers: ['http://127.0.0.1:9'],
      auth: { mode: 'jwt', jwksUrl: 'http://127.0.0.1:9/jwks', issuer: 'https://issuer.example' },
    });
    server = createServer((req, res) => {
      try {
        gateway.app(req, res);
      } catch (error) {
        // In the gateway app this is an uncaught exception: the process ends.
        thrown.push(error);
        res.writeHead(599).end();
      }
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    port = (server.address() as AddressInfo).port;
  });
  after(async () => {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
    await gateway.close();
  });

  for (const host of ['gateway.example:99999', '999.1.1.1']) {
    it(`answers the metadata path 404 for Host ${host}, without throwing`, async () => {
      thrown.length = 0;
      const res = await get(port, '/.well-known/oauth-protected-resource/mcp', host);
      assert.deepEqual(thrown.map(String), []);
      assert.equal(res.status, 404);
    });

    it(`answers /mcp without a token 401 for Host ${host}, not 500`, async () => {
      const res = await get(port, '/mcp', host);
      assert.equal(res.status, 401);
      assert.match(String(res.headers['www-authenticate']), /^Bearer realm="switchyard"/);
    });
  }
});
