// CORS for browser-based MCP clients on allowed origins: what a browser
// checks before it lets a page on another origin send to /mcp and read the
// answer (Node's fetch enforces none of it, so the headers are asserted).
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { INITIALIZE, post, startHarness } from './harness.ts';
import type { Harness } from './harness.ts';

const PAGE = 'http://localhost:5173';
const TOKEN = 'browser-token-0123456789';

function preflight(url: string, origin: string, headers = 'content-type, mcp-session-id, authorization') {
  return fetch(url, {
    method: 'OPTIONS',
    headers: { origin, 'access-control-request-method': 'POST', 'access-control-request-headers': headers },
  });
}

describe('CORS on /mcp', () => {
  let h: Harness;
  before(async () => {
    h = await startHarness(1, {
      allowedOrigins: ['http://localhost:*'],
      auth: { mode: 'bearer', tokens: [TOKEN] },
    });
  });
  after(() => h.close());

  it('answers a preflight from an allowed origin 204 with the methods and the headers it asked for', async () => {
    const res = await preflight(h.url, PAGE);
    assert.equal(res.status, 204, await res.text());
    assert.equal(res.headers.get('access-control-allow-origin'), PAGE);
    assert.deepEqual(res.headers.get('access-control-allow-methods')?.split(', '), ['GET', 'POST', 'DELETE']);
    assert.equal(res.headers.get('access-control-allow-headers'), 'content-type, mcp-session-id, authorization');
    assert.equal(res.headers.get('access-control-max-age'), '600');
    assert.equal(res.headers.get('access-control-allow-credentials'), null, 'tokens go in Authorization');
    assert.match(res.headers.get('vary') ?? '', /Origin/);
    assert.equal(h.runtimes[0]!.seen.length, 0, 'a preflight reaches no runtime');
  });

  it('answers the path form /mcp/<class>/<process> the same', async () => {
    const res = await preflight(h.url.replace(/\/mcp$/, '/mcp/demo/p1'), PAGE);
    assert.equal(res.status, 204);
    assert.equal(res.headers.get('access-control-allow-origin'), PAGE);
  });

  it('refuses a preflight from an origin not allowed with 403 and no CORS header', async () => {
    const res = await preflight(h.url, 'https://evil.example');
    assert.equal(res.status, 403);
    assert.equal(res.headers.get('access-control-allow-origin'), null);
  });

  it("lets the page read a 401's challenge", async () => {
    const res = await post(h.url, INITIALIZE, { origin: PAGE });
    assert.equal(res.status, 401);
    assert.equal(res.headers.get('access-control-allow-origin'), PAGE);
    assert.match(res.headers.get('access-control-expose-headers') ?? '', /WWW-Authenticate/);
  });

  it('lets the page read the answer and its Mcp-Session-Id', async () => {
    const res = await post(h.url, INITIALIZE, { origin: PAGE, authorization: `Bearer ${TOKEN}` });
    assert.equal(res.status, 200);
    assert.ok(res.headers.get('mcp-session-id'));
    assert.equal(res.headers.get('access-control-allow-origin'), PAGE);
    assert.match(res.headers.get('access-control-expose-headers') ?? '', /Mcp-Session-Id/);
    assert.match(res.headers.get('vary') ?? '', /Origin/);
  });

  it('adds nothing for a client that sends no Origin (not a browser page)', async () => {
    const res = await post(h.url, INITIALIZE, { authorization: `Bearer ${TOKEN}` });
    assert.equal(res.status, 200);
    assert.equal(res.headers.get('access-control-allow-origin'), null);
  });

  it('still answers OPTIONS that is no preflight 405', async () => {
    const res = await fetch(h.url, { method: 'OPTIONS', headers: { origin: PAGE } });
    assert.equal(res.status, 405);
    assert.equal(res.headers.get('allow'), 'GET, POST, DELETE', 'the methods /mcp serves (with a session)');
    assert.equal(((await res.json()) as { error: { code: number } }).error.code, -32000);
  });
});
