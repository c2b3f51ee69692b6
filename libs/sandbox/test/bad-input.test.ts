import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import fc from 'fast-check';
import { SANDBOX_DEFAULTS, type SandboxHost } from '@switchyard/sandbox';
import { RecordingReporter, serveHttp1, type Served, testHost } from './fixtures/harness.ts';

const INIT = {
  jsonrpc: '2.0',
  id: 1,
  method: 'initialize',
  params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 't', version: '1' } },
};
const JSON_HEADERS = { 'content-type': 'application/json', accept: 'application/json, text/event-stream' };

describe('bad input at /mcp', () => {
  let host: SandboxHost;
  let served: Served;
  let reporter: RecordingReporter;
  const post = (body: string, headers: Record<string, string> = {}) =>
    fetch(`${served.url}/mcp`, { method: 'POST', headers: { ...JSON_HEADERS, ...headers }, body });

  before(async () => {
    reporter = new RecordingReporter();
    host = testHost({
      runtimeId: 'rt-bad',
      classes: { demo: { engine: 'builtin' } },
      sandboxesMax: 2,
      reporter,
    });
    served = await serveHttp1(host);
  });
  after(async () => {
    await served.close();
    await host.close();
  });

  const cases: {
    name: string;
    body: string;
    headers?: Record<string, string>;
    status: number;
    rpc: number;
    text: RegExp;
  }[] = [
    {
      name: 'malformed JSON is a 400 parse error',
      body: '{"jsonrpc":',
      status: 400,
      rpc: -32700,
      text: /not valid JSON/,
    },
    {
      name: 'an empty body is a 400 parse error',
      body: '',
      status: 400,
      rpc: -32700,
      text: /empty/,
    },
    {
      name: 'a JSON body that is not a message (null) is a 400 invalid request',
      body: 'null',
      headers: { 'x-switchyard-class': 'demo' },
      status: 400,
      rpc: -32600,
      text: /not a valid JSON-RPC message/,
    },
    {
      name: 'an unknown class is a JSON-RPC error naming the class',
      body: JSON.stringify(INIT),
      headers: { 'x-switchyard-class': 'nope' },
      status: 404,
      rpc: -32601,
      text: /"nope"/,
    },
    {
      name: 'no class header and no default class is a 400',
      body: JSON.stringify(INIT),
      status: 400,
      rpc: -32600,
      text: /default/,
    },
    {
      name: 'a malformed process id is a 400 bad identity',
      body: JSON.stringify(INIT),
      headers: { 'x-switchyard-class': 'demo', 'x-switchyard-process': 'has space' },
      status: 400,
      rpc: -32600,
      text: /x-switchyard-process/,
    },
    {
      name: 'a non-initialize request without a session is a 400',
      body: JSON.stringify({ jsonrpc: '2.0', id: 7, method: 'tools/list' }),
      headers: { 'x-switchyard-class': 'demo' },
      status: 400,
      rpc: -32000,
      text: /mcp-session-id/,
    },
    {
      name: 'an initialize without its params is a 400 invalid params, not a missing session',
      body: JSON.stringify({ jsonrpc: '2.0', id: 8, method: 'initialize', params: {} }),
      headers: { 'x-switchyard-class': 'demo' },
      status: 400,
      rpc: -32602,
      text: /protocolVersion/,
    },
    {
      name: 'an initialize inside a batch is a 400 invalid request',
      body: JSON.stringify([INIT]),
      headers: { 'x-switchyard-class': 'demo' },
      status: 400,
      rpc: -32600,
      text: /batch/,
    },
    {
      name: 'an unknown session is a 404',
      body: JSON.stringify({ jsonrpc: '2.0', id: 7, method: 'tools/list' }),
      headers: { 'mcp-session-id': 'no-such-session' },
      status: 404,
      rpc: -32001,
      text: /session not found/,
    },
  ];
  for (const c of cases) {
    it(c.name, async () => {
      const res = await post(c.body, c.headers);
      assert.equal(res.status, c.status);
      const body = (await res.json()) as { error: { code: number; message: string } };
      assert.equal(body.error.code, c.rpc);
      assert.match(body.error.message, c.text);
    });
  }

  it('a body over the limit is a 413 JSON-RPC error, and the host keeps serving', async () => {
    const big = JSON.stringify({ ...INIT, padding: 'x'.repeat(SANDBOX_DEFAULTS.bodyBytesMax) });
    const res = await post(big, { 'x-switchyard-class': 'demo' });
    assert.equal(res.status, 413);
    const body = (await res.json()) as { error: { code: number; message: string } };
    assert.equal(body.error.code, -32000);
    assert.match(body.error.message, /too large|exceeds/i);
    const weight = await fetch(`${served.url}/weight`);
    assert.equal(weight.status, 200);
  });

  it('the sandbox limit answers 503 "sandbox limit reached" and reports idle weight 0', async () => {
    const held: string[] = [];
    for (const pid of ['cap-1', 'cap-2']) {
      const res = await post(JSON.stringify(INIT), { 'x-switchyard-class': 'demo', 'x-switchyard-process': pid });
      assert.equal(res.status, 200);
      held.push(res.headers.get('mcp-session-id')!);
      await res.body?.cancel();
    }
    assert.deepEqual(reporter.weight, { sandboxes: 0 });
    const res = await post(JSON.stringify(INIT), { 'x-switchyard-class': 'demo', 'x-switchyard-process': 'cap-3' });
    assert.equal(res.status, 503);
    const body = (await res.json()) as { error: { message: string } };
    assert.match(body.error.message, /sandbox limit reached/);
    const weight = await fetch(`${served.url}/weight`).then((r) => r.json());
    assert.deepEqual(weight, { sandboxes: 0 });
    for (const sid of held) {
      const del = await fetch(`${served.url}/mcp`, {
        method: 'DELETE',
        headers: { 'mcp-session-id': sid, 'mcp-protocol-version': '2025-06-18' },
      });
      assert.equal(del.status, 200);
    }
  });
});

// A caller's mistake on the REST parity routes is a 4xx naming it, never the 500 of an internal failure.
describe('bad input at the REST parity routes', () => {
  let host: SandboxHost;
  let served: Served;
  const rest = (method: string, path: string, body?: unknown) =>
    fetch(`${served.url}${path}`, {
      method,
      headers: { 'content-type': 'application/json' },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });

  before(async () => {
    host = testHost({ runtimeId: 'rt-bad-rest', classes: { demo: { engine: 'builtin' } }, sandboxesMax: 2 });
    served = await serveHttp1(host);
    const created = await rest('POST', '/sandboxes/rest-bad', { class: 'demo' });
    assert.equal(created.status, 201);
  });
  after(async () => {
    await served.close();
    await host.close();
  });

  const cases: {
    name: string;
    method: string;
    path: string;
    body?: unknown;
    status: number;
    rpc: number;
    text: RegExp;
  }[] = [
    {
      name: 'a sandbox id that is not valid percent-encoding is a 400',
      method: 'GET',
      path: '/sandboxes/%E0%A4%A',
      status: 400,
      rpc: -32600,
      text: /percent-encoding/,
    },
    {
      name: 'a session id that is not valid percent-encoding is a 400',
      method: 'POST',
      path: '/sessions/%ZZ/toolcall',
      body: { name: 'echo' },
      status: 400,
      rpc: -32600,
      text: /percent-encoding/,
    },
    {
      name: 'a call of a tool the sandbox does not have is a 400 invalid params naming it',
      method: 'POST',
      path: '/sandboxes/rest-bad/toolcall',
      body: { name: 'no_such_tool' },
      status: 400,
      rpc: -32602,
      text: /no_such_tool/,
    },
  ];
  for (const c of cases) {
    it(c.name, async () => {
      const res = await rest(c.method, c.path, c.body);
      const body = (await res.json()) as { error: { code: number; message: string } };
      assert.equal(res.status, c.status, JSON.stringify(body));
      assert.equal(body.error.code, c.rpc);
      assert.match(body.error.message, c.text);
    });
  }

  // A page of another site can make a browser send these without a CORS preflight, credentials and all.
  let counted = 0;
  for (const type of ['text/plain', 'application/x-www-form-urlencoded', undefined]) {
    it(`refuses a tool call sent as ${type ?? 'no Content-Type'} with 415, calling nothing`, async () => {
      const calls = await fetch(`${served.url}/sandboxes/rest-bad/toolcall`, {
        method: 'POST',
        ...(type === undefined ? {} : { headers: { 'content-type': type } }),
        body: type === undefined ? undefined : JSON.stringify({ name: 'counter' }),
      });
      const body = (await calls.json()) as { error: { code: number; message: string } };
      assert.equal(calls.status, 415, JSON.stringify(body));
      assert.match(body.error.message, /Content-Type must be application\/json/);
      // The sandbox's counter moves by this call alone: the refused one reached no tool.
      const next = await rest('POST', '/sandboxes/rest-bad/toolcall', { name: 'counter' });
      assert.deepEqual(await next.json(), { content: [{ type: 'text', text: String(++counted) }] });
    });
  }

  it('still answers a good call after them', async () => {
    const res = await rest('POST', '/sandboxes/rest-bad/toolcall', { name: 'echo', arguments: { text: 'ok' } });
    assert.deepEqual(await res.json(), { content: [{ type: 'text', text: 'ok' }] });
  });
});

describe('bad bodies within a session', () => {
  let host: SandboxHost;
  let served: Served;
  const post = (body: string, headers: Record<string, string> = {}) =>
    fetch(`${served.url}/mcp`, { method: 'POST', headers: { ...JSON_HEADERS, ...headers }, body });

  before(async () => {
    host = testHost({ runtimeId: 'rt-bad-session', classes: { demo: { engine: 'builtin' } }, sandboxesMax: 2 });
    served = await serveHttp1(host);
  });
  after(async () => {
    await served.close();
    await host.close();
  });

  // Bodies are read once for routing and handed on parsed; one that is not JSON reaches the SDK as text.
  it("gets the SDK's 400 for each, and the session lives on", async () => {
    const init = await post(JSON.stringify(INIT), { 'x-switchyard-class': 'demo', 'x-switchyard-process': 'bad-1' });
    assert.equal(init.status, 200);
    const session = {
      'x-switchyard-class': 'demo',
      'mcp-session-id': init.headers.get('mcp-session-id')!,
      'mcp-protocol-version': '2025-06-18',
    };
    await init.body?.cancel();
    try {
      for (const [body, code, message] of [
        ['{"jsonrpc":', -32700, /Parse error: Invalid JSON/],
        ['', -32700, /Parse error: Invalid JSON/],
        ['{"hello":1}', -32600, /not a valid JSON-RPC message/],
        ['[]', -32600, /empty JSON-RPC batch/],
      ] as const) {
        const res = await post(body, session);
        assert.equal(res.status, 400, body);
        const answer = (await res.json()) as { error: { code: number; message: string } };
        assert.equal(answer.error.code, code, body);
        assert.match(answer.error.message, message);
      }
      const list = await post(JSON.stringify({ jsonrpc: '2.0', id: 9, method: 'tools/list' }), session);
      assert.equal(list.status, 200);
      assert.match(await list.text(), /"echo"/);
    } finally {
      await fetch(`${served.url}/mcp`, { method: 'DELETE', headers: session });
    }
  });
});

describe('fuzzing /mcp', () => {
  let host: SandboxHost;
  let served: Served;

  before(async () => {
    host = testHost({
      runtimeId: 'rt-fuzz',
      classes: { demo: { engine: 'builtin', expireSeconds: 0 } },
      sandboxesMax: 100_000,
    });
    served = await serveHttp1(host);
  });
  after(async () => {
    await served.close();
    await host.close();
  });

  it('10,000 fuzzed bodies and headers never crash the host nor answer 5xx', async () => {
    const headerName = fc.constantFrom(
      'x-switchyard-class',
      'x-switchyard-process',
      'x-switchyard-session-id',
      'mcp-session-id',
      'mcp-protocol-version',
      'content-type',
      'accept',
    );
    const headerValue = fc.oneof(
      fc.constantFrom('demo', '2025-06-18', '2026-07-28', 'application/json'),
      fc.string({ maxLength: 40 }),
    );
    const printable = (s: string) => s.replace(/[^\x20-\x7e]/g, '');
    const body = fc.oneof(
      fc.string({ maxLength: 200 }),
      fc.json({ maxDepth: 3 }),
      fc
        .record({
          jsonrpc: fc.constantFrom('2.0', '1.0'),
          id: fc.oneof(fc.integer(), fc.string({ maxLength: 8 }), fc.constant(null)),
          method: fc.constantFrom('initialize', 'tools/list', 'tools/call', 'ping', 'server/discover', 'x'),
          params: fc.oneof(fc.constant(undefined), fc.object({ maxDepth: 2 })),
        })
        .map((o) => JSON.stringify(o)),
    );
    const method = fc.constantFrom('POST', 'POST', 'POST', 'GET', 'DELETE', 'PUT');
    let runs = 0;
    await fc.assert(
      fc.asyncProperty(
        method,
        body,
        fc.array(fc.tuple(headerName, headerValue), { maxLength: 4 }),
        async (m, b, hs) => {
          runs++;
          const headers: Record<string, string> = { 'x-switchyard-class': 'demo' };
          for (const [k, v] of hs) headers[k] = printable(v);
          const res = await fetch(`${served.url}/mcp`, { method: m, headers, ...(m === 'POST' && { body: b }) });
          await res.body?.cancel();
          return res.status < 500;
        },
      ),
      { numRuns: 10_000, seed: 42 },
    );
    assert.equal(runs, 10_000);
    const ok = await fetch(`${served.url}/mcp`, {
      method: 'POST',
      headers: { ...JSON_HEADERS, 'x-switchyard-class': 'demo' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'ping' }),
    });
    assert.ok(ok.status < 500, 'host still answers after the fuzz');
  });
});
