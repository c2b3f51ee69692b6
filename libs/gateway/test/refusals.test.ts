// `refusals_total{reason}` of a gateway without auth: each request the
// gateway refuses itself, before anything is sent upstream, is counted once
// under a reason of a fixed set, never under a value the client sent; a
// request served, or refused by its runtime, is not counted. Real requests on
// loopback, real runtimes behind the scheduler double; the counter read from
// the registry's text output.
import net from 'node:net';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { Registry } from 'prom-client';
import { REFUSAL_REASONS } from '@switchyard/gateway';
import { INITIALIZE, post, startHarness, stopServer, type Harness } from './harness.ts';
import { PREFIX, refusalCounts, refusedBy } from './fixtures/refusals.ts';
import { until } from './until.ts';

const ALLOWED_ORIGIN = 'https://app.example';
const BODY_BYTES_MAX = 1024;
const HEADER_BYTES_MAX = 4096;
const LIST_TOOLS = { jsonrpc: '2.0', id: 2, method: 'tools/list' };
const quiet = { upstreamCheckIntervalMs: 0 };

/** A POST of `body` declaring `declared` bytes on a raw socket, left unfinished; the caller destroys it. */
function unfinishedPost(url: string, declared: number, body: string): net.Socket {
  const { hostname, port, pathname } = new URL(url);
  const socket = net.connect(Number(port), hostname);
  socket.on('error', () => {});
  socket.write(
    `POST ${pathname} HTTP/1.1\r\nHost: ${hostname}\r\nContent-Type: application/json\r\n` +
      `Accept: application/json, text/event-stream\r\nContent-Length: ${declared}\r\n\r\n${body}`,
  );
  return socket;
}

describe('refusals_total of a gateway without auth', () => {
  const registry = new Registry();
  let h: Harness;
  before(async () => {
    h = await startHarness(1, {
      ...quiet,
      metrics: { registry, prefix: PREFIX },
      allowedOrigins: [ALLOWED_ORIGIN],
      bodyBytesMax: BODY_BYTES_MAX,
      headerBytesMax: HEADER_BYTES_MAX,
      bodyTimeoutMs: 300,
    });
  });
  after(() => h.close());

  const refused = <T>(send: () => Promise<T>) => refusedBy(registry, h, send);

  it('exports each reason of its fixed set from 0, and no other', async () => {
    // The set is the one operations.md lists (test/docs/metrics.test.ts holds the table to it).
    const zero = Object.fromEntries(REFUSAL_REASONS.map((reason) => [reason, 0]));
    assert.deepEqual(await refusalCounts(registry), zero);
  });

  it('counts a request from an Origin not allowed as origin', async () => {
    const r = await refused(() => post(h.url, INITIALIZE, { origin: 'https://elsewhere.example' }));
    assert.equal(r.answer.status, 403);
    assert.deepEqual(r.moved, { origin: 1 });
    assert.equal(r.scheduled || r.reached, false);
  });

  it('counts a method /mcp does not serve, and a GET without a session, as method_not_allowed', async () => {
    const put = await refused(() => fetch(h.url, { method: 'PUT', body: '{}' }));
    assert.equal(put.answer.status, 405);
    assert.deepEqual(put.moved, { method_not_allowed: 1 });
    const get = await refused(() => fetch(h.url, { headers: { accept: 'text/event-stream' } }));
    assert.equal(get.answer.status, 405);
    assert.deepEqual(get.moved, { method_not_allowed: 1 });
    assert.equal(put.scheduled || put.reached || get.scheduled || get.reached, false);
  });

  it('counts headers past headerBytesMax as header_too_large', async () => {
    const r = await refused(() => post(h.url, INITIALIZE, { 'x-pad': 'a'.repeat(HEADER_BYTES_MAX) }));
    assert.equal(r.answer.status, 431);
    assert.deepEqual(r.moved, { header_too_large: 1 });
    assert.equal(r.scheduled || r.reached, false);
  });

  it('counts an MCP-Protocol-Version it does not pass, or one claimed in the body, as unsupported_protocol_version', async () => {
    const header = await refused(() => post(h.url, INITIALIZE, { 'mcp-protocol-version': '1999-01-01' }));
    assert.equal(header.answer.status, 400);
    assert.deepEqual(header.moved, { unsupported_protocol_version: 1 });
    const claimed = { ...LIST_TOOLS, params: { _meta: { 'io.modelcontextprotocol/protocolVersion': '1999-01-01' } } };
    const body = await refused(() => post(h.url, claimed));
    assert.equal(body.answer.status, 400);
    assert.deepEqual(body.moved, { unsupported_protocol_version: 1 });
    assert.equal(header.scheduled || header.reached || body.scheduled || body.reached, false);
  });

  it('counts a body past bodyBytesMax as body_too_large', async () => {
    const r = await refused(() => post(h.url, { ...INITIALIZE, pad: 'a'.repeat(BODY_BYTES_MAX) }));
    assert.equal(r.answer.status, 413);
    assert.deepEqual(r.moved, { body_too_large: 1 });
    assert.equal(r.scheduled || r.reached, false);
  });

  it('counts a body still arriving at bodyTimeoutMs as request_timeout', async () => {
    let socket: net.Socket | undefined;
    try {
      const r = await refused(async () => {
        socket = unfinishedPost(h.url, 100, '{');
        let answer = '';
        socket.on('data', (chunk: Buffer) => (answer += chunk.toString('latin1')));
        await until(() => answer.includes('\r\n\r\n'), 'an answer to the unfinished body');
        return answer;
      });
      assert.match(r.answer, /^HTTP\/1\.1 408 /);
      assert.deepEqual(r.moved, { request_timeout: 1 });
      assert.equal(r.scheduled || r.reached, false);
    } finally {
      socket?.destroy();
    }
  });

  it('counts a body that is not JSON as parse_error, and JSON that is no message as invalid_request', async () => {
    const text = await refused(() => post(h.url, 'not json'));
    assert.equal(text.answer.status, 400);
    assert.deepEqual(text.moved, { parse_error: 1 });
    const batch = await refused(() => post(h.url, []));
    assert.equal(batch.answer.status, 400);
    assert.deepEqual(batch.moved, { invalid_request: 1 });
    assert.equal(text.scheduled || text.reached || batch.scheduled || batch.reached, false);
  });

  it('counts an identity value it cannot take, in a header or the path, as bad_identity', async () => {
    const header = await refused(() => post(h.url, INITIALIZE, { 'x-switchyard-class': 'no spaces' }));
    assert.equal(header.answer.status, 400);
    assert.deepEqual(header.moved, { bad_identity: 1 });
    const path = await refused(() => post(h.url.replace(/\/mcp$/, '/mcp/%E0%A4%A/p'), INITIALIZE));
    assert.equal(path.answer.status, 400);
    assert.deepEqual(path.moved, { bad_identity: 1 });
    assert.equal(header.scheduled || header.reached || path.scheduled || path.reached, false);
  });

  it('counts a request other than initialize without a session as session_required', async () => {
    const r = await refused(() => post(h.url, LIST_TOOLS));
    assert.equal(r.answer.status, 400);
    assert.deepEqual(r.moved, { session_required: 1 });
    assert.equal(r.scheduled || r.reached, false);
  });

  it('counts nothing for a request served, or one its runtime refuses', async () => {
    const served = await refused(() => post(h.url, INITIALIZE));
    assert.equal(served.answer.status, 200);
    assert.deepEqual(served.moved, {});
    // A session the runtime does not know: its 404, relayed.
    const unknown = await refused(() =>
      post(h.url, LIST_TOOLS, { 'mcp-session-id': 'unknown-session', 'mcp-protocol-version': '2025-06-18' }),
    );
    assert.equal(unknown.answer.status, 404);
    assert.equal(unknown.reached, true);
    assert.deepEqual(unknown.moved, {});
  });
});

describe('refusals_total of a gateway holding a principal to one request at a time', () => {
  const registry = new Registry();
  let h: Harness;
  before(async () => {
    h = await startHarness(1, { ...quiet, metrics: { registry, prefix: PREFIX }, principalConcurrencyMax: 1 });
  });
  after(() => h.close());

  it('counts a request past principalConcurrencyMax as too_many_requests', async () => {
    // Its slot is taken before its body is read: held while the body does not end.
    const holder = unfinishedPost(h.url, 100, '{');
    try {
      await until(() => h.gateway.stats().inFlight === 1, 'the unfinished request counted');
      const r = await refusedBy(registry, h, () => post(h.url, INITIALIZE));
      assert.equal(r.answer.status, 429);
      assert.deepEqual(r.moved, { too_many_requests: 1 });
      assert.equal(r.scheduled || r.reached, false);
    } finally {
      holder.destroy();
    }
  });
});

describe('refusals_total of a gateway that is closing', () => {
  const registry = new Registry();
  let h: Harness;
  before(async () => {
    h = await startHarness(1, { ...quiet, metrics: { registry, prefix: PREFIX } });
  });
  after(() => h.close());

  it('counts a request that arrives once close() was called as shutting_down', async () => {
    await h.gateway.close();
    const r = await refusedBy(registry, h, () => post(h.url, INITIALIZE));
    assert.equal(r.answer.status, 503);
    assert.deepEqual(r.moved, { shutting_down: 1 });
    assert.equal(r.scheduled || r.reached, false);
  });
});

// Headers the gateway takes under its own headerBytesMax may still be past what
// it forwards (FORWARDED_HEADER_BYTES_MAX, 64 KiB): placed, but never sent.
describe('refusals_total of a gateway whose headerBytesMax is past what it forwards', () => {
  const registry = new Registry();
  let h: Harness;
  let server: Server;
  let url: string;
  before(async () => {
    h = await startHarness(1, { ...quiet, metrics: { registry, prefix: PREFIX }, headerBytesMax: 128 * 1024 });
    // Node's own limit (16 KiB by default) would answer 431 before the gateway sees the request.
    server = createServer({ maxHeaderSize: 256 * 1024 }, h.gateway.app);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/mcp`;
  });
  after(async () => {
    await stopServer(server);
    await h.close();
  });

  it('counts forwarded headers past that bound as header_too_large, and sends nothing', async () => {
    const r = await refusedBy(registry, h, () => post(url, INITIALIZE, { 'x-pad': 'a'.repeat(80 * 1024) }));
    assert.equal(r.answer.status, 431);
    assert.deepEqual(r.moved, { header_too_large: 1 });
    assert.equal(r.reached, false);
  });
});

// What Node's parser refuses never reaches the gateway's handler: a header block
// past the server's maxHeaderSize, bytes that are not HTTP. The gateway's
// clientError listener answers those, and counts them as its own.
describe('refusals_total of the requests Node refuses before the gateway sees them', () => {
  const registry = new Registry();
  let h: Harness;
  let server: Server;
  let port: number;
  before(async () => {
    h = await startHarness(1, { ...quiet, metrics: { registry, prefix: PREFIX } });
    server = createServer(h.gateway.app);
    server.on('clientError', h.gateway.clientError);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    port = (server.address() as AddressInfo).port;
  });
  after(async () => {
    await stopServer(server);
    await h.close();
  });

  /**
   * Writes `bytes` on a new connection, and with `end` ends the client's side
   * after them; its whole answer, once the gateway closes it.
   */
  async function exchange(bytes: string, end = false): Promise<string> {
    const socket = net.connect(port, '127.0.0.1');
    socket.on('error', () => {});
    let answer = '';
    socket.on('data', (chunk: Buffer) => (answer += chunk.toString('latin1')));
    const closed = new Promise((resolve) => socket.once('close', resolve));
    if (end) socket.end(bytes);
    else socket.write(bytes);
    await closed;
    return answer;
  }

  it('counts a header block past maxHeaderSize as header_too_large', async () => {
    const pad = 'a'.repeat(32 * 1024);
    const r = await refusedBy(registry, h, () => exchange(`POST /mcp HTTP/1.1\r\nHost: x\r\nX-Pad: ${pad}\r\n\r\n`));
    assert.match(r.answer, /^HTTP\/1\.1 431 /);
    assert.deepEqual(r.moved, { header_too_large: 1 });
  });

  it('counts bytes that are not HTTP as invalid_request', async () => {
    const r = await refusedBy(registry, h, () => exchange('NOT HTTP AT ALL\r\n\r\n'));
    assert.match(r.answer, /^HTTP\/1\.1 400 /);
    assert.deepEqual(r.moved, { invalid_request: 1 });
  });

  it('counts nothing for a client that went away part-way through its request', async () => {
    const headers = await refusedBy(registry, h, () => exchange('POST /mcp HTTP/1.1\r\nHost: x\r\nX-Pa', true));
    assert.deepEqual(headers.moved, {});
    const body = 'POST /mcp HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{';
    const cut = await refusedBy(registry, h, () => exchange(body, true));
    assert.deepEqual(cut.moved, {});
    assert.equal(cut.reached, false);
  });
});
