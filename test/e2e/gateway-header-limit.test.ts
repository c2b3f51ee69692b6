// The gateway binary's limit on request headers (--header-bytes-max) is the
// one its clients meet, whatever Node's own parser would take: a block under
// it is served (a large JWT or cookie, which the gateway reads and never
// forwards), and one that Node's parser refuses is answered 431 with a
// JSON-RPC body like the gateway's other refusals. No scheduler is needed:
// the headers are checked, and the body read, before a request is routed.
import net from 'node:net';
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawnApp, type AppProcess } from '../support/processes.ts';

/** Past Node's default (16 KiB); what the tests send stays in one loopback segment, so one read takes it whole. */
const HEADER_BYTES_MAX = 20 * 1024;

/** A POST whose body is not JSON: 400 once past the header gates, without a scheduler. */
async function postGarbage(port: number, headers: Record<string, string>): Promise<{ status: number; body: string }> {
  const res = await fetch(`http://127.0.0.1:${port}/mcp`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...headers },
    body: 'not json',
  });
  return { status: res.status, body: await res.text() };
}

/** Writes `request` in one piece and resolves with all the gateway sent before the connection closed (bounded). */
function exchangeRaw(port: number, request: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, '127.0.0.1');
    let answer = '';
    const timer = setTimeout(() => (socket.destroy(), reject(new Error(`still open; so far: ${answer}`))), 5_000);
    socket.on('data', (chunk: Buffer) => (answer += chunk.toString('latin1')));
    // The connection is closed once the refusal is out; a reset after it changes nothing here.
    socket.on('error', () => {});
    socket.once('close', () => (clearTimeout(timer), resolve(answer)));
    socket.write(request);
  });
}

describe('the gateway binary and its header limit', () => {
  let gateway: AppProcess;
  before(async () => {
    gateway = await spawnApp('gateway', 'gw-header-limit', [
      ...['--host', '127.0.0.1', '--port', '0', '--schedulers', 'http://127.0.0.1:1', '--drain-delay-ms', '0'],
      ...['--header-bytes-max', String(HEADER_BYTES_MAX)],
    ]);
  });
  after(() => gateway?.stop());

  it('takes a header block past Node’s default 16 KiB while under --header-bytes-max', async () => {
    const answer = await postGarbage(gateway.port!, { 'x-pad': 'a'.repeat(18 * 1024) });
    assert.equal(answer.status, 400, answer.body);
    assert.match(answer.body, /"code":-32700/);
  });

  it('answers a block past what its parser takes 431 with a JSON-RPC body, and closes the connection', async () => {
    const answer = await exchangeRaw(
      gateway.port!,
      `POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Pad: ${'a'.repeat(24 * 1024)}\r\nContent-Length: 2\r\n\r\n{}`,
    );
    const [head = '', body = ''] = answer.split('\r\n\r\n');
    assert.match(head, /^HTTP\/1\.1 431 /);
    assert.match(head, /\r\ncontent-type: application\/json/i);
    assert.deepEqual(JSON.parse(body), {
      jsonrpc: '2.0',
      id: null,
      error: { code: -32600, message: 'Request headers too large', data: { reason: 'header_too_large' } },
    });
  });
});
