// postJson, a replica's call to the leader, between real servers on loopback (plain and TLS): what it
// sends, what it gives back, what it rejects, and that it rides the keep-alive connections the forwards
// to the same replica hold (one pool per scheduler process, not one per kind of call).
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { once } from 'node:events';
import http from 'node:http';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import tls from 'node:tls';
import { within } from '@switchyard/clock/testing';
import { certificateFor127 } from '@switchyard/service/testing';
import { forwardToReplica, postJson } from '../src/forward.ts';

interface Seen {
  connections: number;
  headers: http.IncomingHttpHeaders[];
  bodies: string[];
}

/** The leader's stand-in: answers by path, and counts the connections it accepted. */
function leaderHandler(seen: Seen): http.RequestListener {
  return (req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.once('end', () => {
      seen.headers.push(req.headers);
      seen.bodies.push(Buffer.concat(chunks).toString());
      const json = { 'content-type': 'application/json' };
      if (req.url === '/refused') return void res.writeHead(503, json).end('{"error":"no","code":"not_ready"}');
      if (req.url === '/text') return void res.writeHead(200, { 'content-type': 'text/plain' }).end('not json');
      if (req.url === '/cut') {
        res.writeHead(200, { ...json, 'content-length': '100' }).write('{"runtime":');
        return void setImmediate(() => req.socket.destroy());
      }
      res.writeHead(200, json).end('{"runtime":"r1"}');
    });
  };
}

async function listen(server: http.Server, scheme: string): Promise<string> {
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return `${scheme}://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

function close(server: http.Server): Promise<unknown> {
  server.closeAllConnections();
  return new Promise((resolve) => server.close(resolve));
}

describe('postJson', () => {
  const seen: Seen = { connections: 0, headers: [], bodies: [] };
  const leader = http.createServer(leaderHandler(seen));
  let url: string;
  before(async () => {
    url = await listen(leader, 'http');
  });
  after(() => close(leader));

  it('POSTs the body as JSON marked as forwarded once, with the token given, and answers status and body', async () => {
    const answer = await postJson(`${url}/api/schedule`, { class: 'demo' }, 5000, 'Bearer t');
    assert.deepEqual(answer, { status: 200, body: { runtime: 'r1' } });
    const headers = seen.headers.at(-1)!;
    assert.equal(headers['content-type'], 'application/json');
    assert.equal(headers['x-switchyard-hop'], '1');
    assert.equal(headers.authorization, 'Bearer t');
    assert.equal(seen.bodies.at(-1), '{"class":"demo"}');
    await postJson(`${url}/api/schedule`, {}, 5000);
    assert.equal(seen.headers.at(-1)!.authorization, undefined);
  });

  it("answers the leader's refusal as it came", async () => {
    assert.deepEqual(await postJson(`${url}/refused`, {}, 5000), {
      status: 503,
      body: { error: 'no', code: 'not_ready' },
    });
  });

  it('rejects an answer that is not JSON, and one cut short', async () => {
    await within(assert.rejects(postJson(`${url}/text`, {}, 5000), SyntaxError), 5000, 'the text answer');
    await within(assert.rejects(postJson(`${url}/cut`, {}, 5000)), 5000, 'the cut answer');
  });
});

for (const scheme of ['http', 'https'] as const) {
  describe(`postJson and the forwards to one replica (${scheme})`, () => {
    const certificate = certificateFor127();
    const missing = scheme === 'https' && 'missing' in certificate ? certificate.missing : false;
    const defaults = tls.getCACertificates('default');
    const seen: Seen = { connections: 0, headers: [], bodies: [] };
    let owner: http.Server | undefined;
    let front: http.Server | undefined;
    let ownerUrl: string;
    let frontUrl: string;
    before(async () => {
      if (missing || 'missing' in certificate) return;
      if (scheme === 'https') tls.setDefaultCACertificates([...defaults, certificate.cert]);
      owner = scheme === 'https' ? https.createServer(certificate) : http.createServer();
      owner.on('request', leaderHandler(seen));
      owner.on(scheme === 'https' ? 'secureConnection' : 'connection', () => seen.connections++);
      ownerUrl = await listen(owner, scheme);
      front = http.createServer((req, res) => forwardToReplica(req, res, `${ownerUrl}${req.url}`, 'r1'));
      frontUrl = await listen(front, 'http');
    });
    after(async () => {
      await Promise.all([owner && close(owner), front && close(front)]);
      tls.setDefaultCACertificates(defaults);
    });

    it('reuses the connection a forward left open to that replica', { skip: missing }, async () => {
      const forwarded = await fetch(`${frontUrl}/api/proxy/r1/x`, { signal: AbortSignal.timeout(5000) });
      assert.deepEqual(await forwarded.json(), { runtime: 'r1' });
      assert.equal(seen.connections, 1);
      assert.deepEqual(await postJson(`${ownerUrl}/api/schedule`, {}, 5000), { status: 200, body: { runtime: 'r1' } });
      assert.deepEqual(await postJson(`${ownerUrl}/api/schedule`, {}, 5000), { status: 200, body: { runtime: 'r1' } });
      assert.equal(seen.connections, 1);
    });
  });
}
