// httpRequest, the commands' one HTTP exchange, against real servers on loopback: what the readers of its
// answer and the messages built from its failures (inspect's unreachableReason) rely on. It answers a
// redirect rather than follow it, and fails with the connection's or TLS handshake's own error (its code
// picks the hint), an aborted signal's reason before the head or while the body is read.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import { createServer as createTlsServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import { certificateFor127 } from '@switchyard/service/testing';
import { httpRequest } from '../src/http-request.ts';

/** Answers by path; counts the requests each path was sent. */
function serve(seen: Map<string, number>): Server {
  return createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      seen.set(req.url!, (seen.get(req.url!) ?? 0) + 1);
      if (req.url === '/moved') return void res.writeHead(307, { location: '/echo' }).end('moved');
      if (req.url === '/empty') return void res.writeHead(204).end();
      if (req.url === '/odd') return void res.writeHead(999, { 'content-type': 'application/json' }).end('{}');
      if (req.url === '/hang') return void res.writeHead(200).write('first ');
      const answer = { method: req.method, body: Buffer.concat(chunks).toString(), token: req.headers['x-token'] };
      res.writeHead(201, { 'content-type': 'application/json', 'x-one': 'a' }).end(JSON.stringify(answer));
    });
  });
}

async function listen(server: Server): Promise<string> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return `127.0.0.1:${(server.address() as AddressInfo).port}`;
}

function close(server: Server): Promise<unknown> {
  server.closeAllConnections();
  return new Promise((resolve) => server.close(resolve));
}

describe('httpRequest', () => {
  const seen = new Map<string, number>();
  const server = serve(seen);
  let base: string;
  before(async () => {
    base = `http://${await listen(server)}`;
  });
  after(() => close(server));

  it('sends the method, headers and body, and answers the status, headers and body', async () => {
    const res = await httpRequest(`${base}/echo`, { method: 'POST', headers: { 'x-token': 't' }, body: 'hi' });
    assert.equal(res.status, 201);
    assert.equal(res.headers.get('x-one'), 'a');
    assert.deepEqual(await res.json(), { method: 'POST', body: 'hi', token: 't' });
  });

  it('answers a redirect as it came, without following it', async () => {
    const before = seen.get('/echo') ?? 0;
    const res = await httpRequest(`${base}/moved`, { method: 'POST', body: 'x' });
    assert.equal(res.status, 307);
    assert.equal(res.headers.get('location'), '/echo');
    assert.equal(await res.text(), 'moved');
    assert.equal(seen.get('/echo') ?? 0, before);
  });

  it('answers a 204 without a body, and a status outside 200-599 as the status that came', async () => {
    const empty = await httpRequest(`${base}/empty`);
    assert.equal(empty.status, 204);
    assert.equal(empty.body, null);
    const odd = await httpRequest(`${base}/odd`);
    assert.equal(odd.status, 999);
    assert.deepEqual(await odd.json(), {});
  });

  it("fails with a refused connection's own error, not a fetch failure wrapping it", async () => {
    const failure = await httpRequest('http://127.0.0.1:1/').catch((e: unknown) => e);
    assert.ok(!(failure instanceof TypeError), String(failure));
    assert.equal((failure as NodeJS.ErrnoException).code, 'ECONNREFUSED');
    assert.equal((failure as Error).message, 'connect ECONNREFUSED 127.0.0.1:1');
  });

  it("rejects with an aborted signal's reason, before the answer and while its body is read", async () => {
    const early = new AbortController();
    early.abort(new Error('early'));
    await assert.rejects(httpRequest(`${base}/echo`, { signal: early.signal }), /^Error: early$/);
    const late = new AbortController();
    const res = await httpRequest(`${base}/hang`, { signal: late.signal });
    const reading = res.text();
    late.abort(new Error('late'));
    await assert.rejects(reading, /^Error: late$/);
  });
});

describe('httpRequest to a server whose certificate is not trusted', () => {
  const certificate = certificateFor127();
  const server = 'missing' in certificate ? undefined : createTlsServer(certificate, (_req, res) => res.end('ok'));
  let base: string;
  before(async () => {
    if (server) base = `https://${await listen(server)}`;
  });
  after(() => server && close(server));

  it(
    "fails with the TLS handshake's own error",
    { skip: 'missing' in certificate && certificate.missing },
    async () => {
      const failure = await httpRequest(`${base}/`).catch((e: unknown) => e);
      assert.ok(!(failure instanceof TypeError), String(failure));
      assert.equal((failure as NodeJS.ErrnoException).code, 'DEPTH_ZERO_SELF_SIGNED_CERT');
      assert.match((failure as Error).message, /^self-signed certificate/);
    },
  );
});
