// A runtime answer that fails after its head went out must reach the peer
// broken, over the tunnel (HTTP/2) as over HTTP/1.1: Node's compat response
// ends an HTTP/2 stream cleanly on a bare destroy(), and the scheduler then
// relays a cut answer as a complete one.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { once } from 'node:events';
import http from 'node:http';
import http2 from 'node:http2';
import type { AddressInfo } from 'node:net';
import { sendJson } from '../src/http.ts';

/** A handler that starts an answer, then fails it the way the runtime's handlers report errors. */
function failAfterHead(_req: unknown, res: http.ServerResponse | http2.Http2ServerResponse): void {
  (res as http.ServerResponse).writeHead(200, { 'content-type': 'text/event-stream' });
  (res as http.ServerResponse).write('data: one\n\n');
  setTimeout(() => sendJson(res, 500, { error: 'internal error' }), 20);
}

describe('an answer that fails after its head', () => {
  let h2: http2.Http2Server;
  let h1: http.Server;
  before(async () => {
    h2 = http2.createServer(failAfterHead);
    h1 = http.createServer(failAfterHead);
    h2.listen(0, '127.0.0.1');
    h1.listen(0, '127.0.0.1');
    await Promise.all([once(h2, 'listening'), once(h1, 'listening')]);
  });
  after(async () => {
    await Promise.all([new Promise((r) => h2.close(r)), new Promise((r) => h1.close(r))]);
  });

  it('is reset over HTTP/2, not ended', async () => {
    const session = http2.connect(`http://127.0.0.1:${(h2.address() as AddressInfo).port}`);
    session.on('error', () => {});
    try {
      const stream = session.request({ ':path': '/' });
      stream.on('error', () => {});
      let ended = false;
      stream.on('data', () => {});
      stream.on('end', () => (ended = true));
      await new Promise((resolve) => stream.once('close', resolve));
      assert.equal(ended, false, 'the cut answer ended like a complete one');
      assert.equal(stream.rstCode, http2.constants.NGHTTP2_INTERNAL_ERROR);
    } finally {
      session.close();
    }
  });

  it('is aborted over HTTP/1.1', async () => {
    const res = await new Promise<http.IncomingMessage>((resolve) =>
      http.get({ host: '127.0.0.1', port: (h1.address() as AddressInfo).port, path: '/' }, resolve),
    );
    let ended = false;
    res.on('data', () => {});
    res.on('end', () => (ended = true));
    res.on('error', () => {});
    await new Promise((resolve) => res.once('close', resolve));
    assert.equal(ended, false);
    assert.equal(res.complete, false);
  });
});
