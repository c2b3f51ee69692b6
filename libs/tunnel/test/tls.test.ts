// Tunnels to a scheduler serving TLS on its own port (an HTTPS server taking
// the upgrade, as a replica with `tls.certFile` does): HTTP/2 runs natively
// on the TLS socket the HTTPS server upgraded, both ways, for runtimes that
// join together. (Node aborts a process whose HTTP/2 takes over a TLS socket
// while a write of its own is in flight; the endpoint waits for its 101 to be
// written. That abort depends on timing: it showed on every run of the
// process-level TLS suite when replica TLS came in, never in this file.)
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { once } from 'node:events';
import type http2 from 'node:http2';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import tls from 'node:tls';
import { certificateFor127 } from '@switchyard/service/testing';
import { createTunnelEndpoint, dialTunnel } from '../src/index.ts';
import type { TunnelDialer, TunnelEndpoint } from '../src/index.ts';
import { TOKEN, readStream, runtimeInfo } from './helpers.ts';

const certificate = certificateFor127();
const missing = 'missing' in certificate ? certificate.missing : false;
const BIG = 4 * 1024 * 1024;

/** Echoes a request body back, or answers `/big` with BIG bytes. */
function handler(req: http2.Http2ServerRequest, res: http2.Http2ServerResponse): void {
  if (req.url === '/big') return void res.end(Buffer.alloc(BIG, 0x62));
  req.pipe(res);
}

describe('tunnels inside TLS that the scheduler serves itself', { skip: missing }, () => {
  let endpoint: TunnelEndpoint;
  let server: https.Server;
  const dialers: TunnelDialer[] = [];
  before(async () => {
    if ('missing' in certificate) return;
    tls.setDefaultCACertificates([...tls.getCACertificates('default'), certificate.cert]);
    endpoint = createTunnelEndpoint({ tokens: () => [TOKEN], maxRuntimes: 8 });
    server = https.createServer({ cert: certificate.cert, key: certificate.key }, (_req, res) => res.end());
    server.on('upgrade', (req, socket, head) => endpoint.handleUpgrade(req, socket, head));
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
  });
  after(async () => {
    await Promise.all(dialers.map((d) => d.close()));
    endpoint?.close();
    server?.closeAllConnections();
    server?.close();
  });

  it('carries requests both ways on runtimes that join one after another and at once', async () => {
    const url = `https://127.0.0.1:${(server.address() as AddressInfo).port}`;
    const ids = ['tls-0', 'tls-1', 'tls-2', 'tls-3'];
    await Promise.all(
      ids.map(
        (id) =>
          new Promise<void>((resolve) => {
            dialers.push(
              dialTunnel({
                url,
                token: TOKEN,
                info: runtimeInfo(id),
                handler,
                transport: 'http2',
                onConnected: resolve,
              }),
            );
          }),
      ),
    );
    for (const id of ids) {
      const tunnel = endpoint.get(id)!;
      assert.equal(tunnel.transport, 'http2');
      const echoes = await Promise.all(
        Array.from({ length: 20 }, async (_, i) => {
          const stream = tunnel.request({ ':method': 'POST', ':path': '/echo' });
          stream.end(`body ${i} `.repeat(1000));
          return (await readStream(stream)).body;
        }),
      );
      echoes.forEach((body, i) => assert.equal(body, `body ${i} `.repeat(1000)));
      const big = await readStream(tunnel.request({ ':path': '/big' }));
      assert.equal(big.body.length, BIG);
    }
  });
});
