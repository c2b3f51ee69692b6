import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { Registry } from 'prom-client';
import { SwitchyardError } from '@switchyard/protocol';
import { createGateway, parseStrategy } from '@switchyard/gateway';
import { resolvePart } from '../src/identity.ts';
import { INITIALIZE, listen, post, stopServer, startHarness } from './harness.ts';

describe('identity strategies', () => {
  const parsed: [string, unknown][] = [
    ['default:demo', { kind: 'default', value: 'demo' }],
    ['random', { kind: 'random' }],
    ['mcp-session', { kind: 'mcp-session' }],
    ['header:Mcp-Param-Sandbox', { kind: 'header', name: 'mcp-param-sandbox' }],
    ['query:sandbox', { kind: 'query', name: 'sandbox' }],
    ['path:process', { kind: 'path', name: 'process' }],
    ['principal', { kind: 'principal' }],
  ];
  for (const [text, expected] of parsed) {
    it(`parses '${text}'`, () => assert.deepEqual(parseStrategy(text), expected));
  }
  const refused = [
    '',
    'header:',
    'default:bad value',
    'random:x',
    'cookie:x',
    // Set by the gateway alone and stripped from clients: read from a client, they would be trusted.
    'header:X-Switchyard-Principal',
    'header:x-switchyard-session-id',
    'header:X-Switchyard-Forwarded',
    // Connection-level or credentials: never a sandbox's name, and a credential would reach runtimes.
    'header:Connection',
    'header:Transfer-Encoding',
    'header:Authorization',
    'header:bad name',
    // The path form has these two parameters only: any other would never yield a value.
    'path:sandbox',
    'path:constructor',
  ];
  for (const text of refused) {
    it(`refuses '${text}' as a configuration error`, () =>
      assert.throws(
        () => parseStrategy(text),
        (e) => e instanceof SwitchyardError && e.code === 'invalid_request',
      ));
  }

  it('reads only what a request carries, never what every object inherits', () => {
    const src = { headers: {}, query: Object.freeze({}), params: { class: 'demo', process: 'p' } };
    for (const text of ['header:constructor', 'query:constructor', 'query:__proto__', 'query:toString']) {
      assert.equal(resolvePart('process', [parseStrategy(text)], src), undefined, text);
    }
  });

  it('refuses invalid strategies when the gateway is created', () => {
    assert.throws(
      () => createGateway({ schedulers: ['http://127.0.0.1:1'], identity: { class: ['nope:x'] } }),
      SwitchyardError,
    );
  });

  it('takes class and process from the path and the query when configured', async () => {
    const h = await startHarness(1, {
      identity: { process: ['query:sandbox', 'path:process'] },
      metrics: { registry: new Registry(), prefix: 'switchyard_gateway_' },
    });
    try {
      const viaPath = await post(h.url.replace(/\/mcp$/, '/mcp/demo/box-1'), INITIALIZE);
      const viaQuery = await post(`${h.url}?sandbox=box-2`, INITIALIZE);
      const bad = await post(`${h.url}?sandbox=${encodeURIComponent('no/slash')}`, INITIALIZE);
      assert.deepEqual([viaPath.status, viaQuery.status, bad.status], [200, 200, 400]);
      const calls = h.scheduler.calls.slice(-2).map((c) => [c.class, c.processId]);
      assert.deepEqual(calls, [
        ['demo', 'box-1'],
        ['default', 'box-2'],
      ]);
    } finally {
      await h.close();
    }
  });
  it('answers a path of neither form 404, naming both', async () => {
    const h = await startHarness(1);
    try {
      for (const path of ['/mcp/demo/box-1/more', '/', '/mcp/']) {
        const res = await post(h.url.replace(/\/mcp$/, path), INITIALIZE);
        if (path === '/mcp/') {
          assert.equal(res.status, 200, 'one trailing slash is /mcp');
          continue;
        }
        assert.equal(res.status, 404, path);
        const { error } = res.json as { error: { message: string } };
        assert.equal(error.message, 'Not found: the MCP endpoint is /mcp, or /mcp/<class>/<process>', path);
      }
    } finally {
      await h.close();
    }
  });

  it('answers /mcp/<class> 404 saying its process part is missing, so its client learns the other half', async () => {
    const h = await startHarness(1);
    try {
      for (const path of ['/mcp/demo', '/MCP/demo/']) {
        const res = await post(h.url.replace(/\/mcp$/, path), INITIALIZE);
        assert.equal(res.status, 404, path);
        const { jsonrpc, error } = res.json as { jsonrpc: string; error: { code: number; message: string } };
        assert.equal(jsonrpc, '2.0');
        assert.equal(typeof error.code, 'number');
        assert.equal(
          error.message,
          'Not found: the process part is missing; the path form is /mcp/<class>/<process>, or use /mcp',
          path,
        );
      }
    } finally {
      await h.close();
    }
  });
});

describe('scheduler failover and metrics', () => {
  it('fails over to the next scheduler replica and exports request and schedule metrics', async () => {
    const base = await startHarness(1);
    const registry = new Registry();
    const gateway = createGateway({
      schedulers: ['http://127.0.0.1:1', base.scheduler.url],
      upstreamMode: 'direct',
      metrics: { registry, prefix: 'switchyard_gateway_' },
    });
    const { server, url } = await listen(gateway);
    try {
      assert.equal((await post(url, INITIALIZE)).status, 200);
      const text = await registry.metrics();
      assert.match(text, /switchyard_gateway_requests_total\{method="POST",code="200"\} 1/);
      assert.match(text, /switchyard_gateway_schedule_duration_seconds_count\{outcome="ok"\} 1/);
      assert.doesNotMatch(text, /[0-9a-f]{32}/, 'no session ids in labels');
    } finally {
      await stopServer(server);
      await gateway.close();
      await gateway.close();
      await base.close();
    }
  });

  it('answers 503 with a JSON-RPC error when no scheduler replica answers', async () => {
    const gateway = createGateway({ schedulers: ['http://127.0.0.1:1'] });
    const { server, url } = await listen(gateway);
    try {
      const res = await post(url, INITIALIZE);
      assert.equal(res.status, 503);
      assert.equal((res.json as { id: number; error: { code: number } }).id, 1);
    } finally {
      await stopServer(server);
      await gateway.close();
    }
  });
});
