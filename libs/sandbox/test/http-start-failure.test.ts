// An http class whose upstream cannot be reached, or refuses the runtime:
// the operator reads why in the one warning its start failure logs (what
// the connection or the upstream said), while the client is told only that
// the sandbox could not start, with neither the upstream's address nor its
// credentials.
import assert from 'node:assert/strict';
import { once } from 'node:events';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import type { SandboxHost } from '@switchyard/sandbox';
import { captureLogger, serveHttp1, testHost, type Served } from './fixtures/harness.ts';

const SECRET = 'Bearer s3cret-upstream-token';

async function initialize(served: Served, className: string): Promise<Response> {
  return fetch(`${served.url}/mcp`, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      'x-switchyard-class': className,
    },
    body: JSON.stringify({
      jsonrpc: '2.0',
      id: 1,
      method: 'initialize',
      params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 't', version: '1' } },
    }),
  });
}

describe('an http class whose upstream fails the start', () => {
  const logger = captureLogger();
  // Answers every request 401, as an upstream that does not take the configured token.
  const denying = http.createServer((_req, res) => {
    res.writeHead(401, { 'content-type': 'application/json' }).end('{"error":"invalid token"}');
  });
  let host: SandboxHost;
  let served: Served;

  before(async () => {
    denying.listen(0, '127.0.0.1');
    await once(denying, 'listening');
    const deniedUrl = `http://127.0.0.1:${(denying.address() as AddressInfo).port}/mcp`;
    host = testHost({
      runtimeId: 'rt-http-start',
      classes: {
        // Nothing listens on port 1.
        refused: { engine: 'http', url: 'http://127.0.0.1:1/mcp', headers: { authorization: SECRET } },
        denied: { engine: 'http', url: deniedUrl, headers: { authorization: SECRET } },
      },
      logger,
    });
    served = await serveHttp1(host);
  });
  after(async () => {
    await served.close();
    await host.close();
    denying.closeAllConnections();
    await new Promise((resolve) => denying.close(resolve));
  });

  const cases = [
    { className: 'refused', said: /ECONNREFUSED 127\.0\.0\.1:1/ },
    { className: 'denied', said: /HTTP 401.*invalid token/ },
  ];
  for (const c of cases) {
    it(`logs what the ${c.className} upstream's start failed on, and tells the client only that it could not start`, async () => {
      const reply = await initialize(served, c.className);
      const text = await reply.text();
      assert.equal(reply.status, 502, text);
      assert.match(text, /could not start/);
      assert.doesNotMatch(text, /127\.0\.0\.1|s3cret|invalid token/);
      const failed = logger.lines.filter((l) => l.obj.event === 'sandbox.start_failed' && l.obj.class === c.className);
      assert.equal(failed.length, 1, JSON.stringify(failed));
      assert.match(String(failed[0]!.obj.err), c.said);
      assert.doesNotMatch(JSON.stringify(failed), /s3cret/);
    });
  }
});
