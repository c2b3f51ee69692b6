import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { Agent } from 'undici';
import { startHarness } from './harness.ts';
import type { Harness } from './harness.ts';

const REQUESTS = 10_000;
const PARALLEL = 16;
const printable = fc.string({ unit: fc.constantFrom(...'abcXYZ019 ._:@-/!{}"\'%\\'.split('')), maxLength: 40 });

const requestArb = fc.record({
  method: fc.constantFrom('POST', 'POST', 'POST', 'GET', 'DELETE', 'PUT', 'PATCH'),
  version: fc.option(fc.constantFrom('2025-06-18', '2026-07-28', '2024-01-01', '', 'x'), { nil: undefined }),
  session: fc.option(fc.oneof(printable, fc.stringMatching(/^[0-9a-f]{32}$/)), { nil: undefined }),
  process: fc.option(printable, { nil: undefined }),
  cls: fc.option(printable, { nil: undefined }),
  origin: fc.option(fc.constantFrom('https://evil.example', 'null'), { nil: undefined }),
  contentType: fc.constantFrom('application/json', 'text/plain', 'application/json; charset=utf-8'),
  body: fc.oneof(
    fc.json({ maxDepth: 3 }),
    printable,
    fc
      .record({
        jsonrpc: fc.constantFrom('2.0', '1.0'),
        id: fc.oneof(fc.integer(), fc.string({ maxLength: 8 }), fc.constant(null)),
        method: fc.constantFrom('tools/list', 'ping', 'tools/call', 'notifications/initialized', 'server/discover', ''),
        params: fc.option(fc.object({ maxDepth: 2 }), { nil: undefined }),
      })
      .map((m) => JSON.stringify(m)),
  ),
});

describe('fuzzed requests', () => {
  let h: Harness;
  let agent: Agent;
  before(async () => {
    h = await startHarness(1, { bodyBytesMax: 4096 });
    agent = new Agent({ connections: PARALLEL });
  });
  after(async () => {
    await agent.close();
    await h.close();
  });

  it(`never crashes the gateway nor answers a client error with a 5xx (${REQUESTS} requests)`, async () => {
    const cases = fc.sample(requestArb, { numRuns: REQUESTS, seed: 42 });
    const url = new URL(h.url);
    const failures: string[] = [];
    let next = 0;
    const worker = async (): Promise<void> => {
      while (next < cases.length) {
        const c = cases[next++]!;
        const headers: Record<string, string> = {
          'content-type': c.contentType,
          accept: 'application/json, text/event-stream',
        };
        if (c.version !== undefined) headers['mcp-protocol-version'] = c.version;
        if (c.session !== undefined) headers['mcp-session-id'] = c.session;
        if (c.process !== undefined) headers['x-switchyard-process'] = c.process;
        if (c.cls !== undefined) headers['x-switchyard-class'] = c.cls;
        if (c.origin !== undefined) headers.origin = c.origin;
        const body = typeof c.body === 'string' ? c.body : JSON.stringify(c.body);
        const res = await agent.request({
          origin: url.origin,
          path: url.pathname,
          method: c.method,
          headers,
          ...(c.method === 'GET' ? {} : { body }),
          headersTimeout: 10_000,
        });
        const text = await res.body.text();
        if (res.statusCode >= 500 && failures.length < 5)
          failures.push(`${res.statusCode} ${text} for ${JSON.stringify(c)}`);
      }
    };
    await Promise.all(Array.from({ length: PARALLEL }, worker));
    assert.deepEqual(failures, []);
    const health = await agent.request({ origin: url.origin, path: url.pathname, method: 'GET' });
    await health.body.text();
    assert.equal(health.statusCode, 405, 'the gateway still answers');
  });
});
