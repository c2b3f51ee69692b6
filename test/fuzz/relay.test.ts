// Fuzz: relay connections. Arbitrary relay requests to a real scheduler
// replica, and arbitrary bytes (noise, or HTTP/1.1 requests with arbitrary
// methods, paths, headers and bodies) on relays it granted into a real
// runtime's tunnel. Property: every relay request gets an answer, never a
// server error but the refusal of a runtime that is not connected here,
// every relay to the runtime is granted, and afterwards both processes'
// servers still work: the runtime stays available and serves MCP on a new relay.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type net from 'node:net';
import fc from 'fast-check';
import { PROXY_ERRORS, RELAY } from '@switchyard/protocol';
import { askRelay, exchangeRaw } from '@switchyard/tunnel/testing';
import { RELAY_REGRESSIONS, type RelayCase } from './regressions.ts';
import { FUZZ_SEED, describeFailures, runCases, startFuzzCluster, type FuzzCluster } from './support.ts';

const CASES = 10_000;
const PARALLEL = 32;
/** Longest wait for the far end to close a relay after a case's bytes. */
const CLOSE_WAIT_MS = 1000;

const token = fc.stringMatching(/^[!-~]{0,24}$/);
const headerLine = fc
  .tuple(fc.stringMatching(/^[A-Za-z0-9-]{1,16}$/), fc.stringMatching(/^[ -~]{0,40}$/))
  .map(([name, value]) => `${name}: ${value}\r\n`);
const httpRequest = fc
  .record({
    method: fc.constantFrom('GET', 'POST', 'DELETE', 'PUT', 'OPTIONS', 'BREW'),
    path: fc.oneof(
      fc.constant('/mcp'),
      fc.constant('/healthz'),
      fc.constant('/watch'),
      token.map((t) => `/${t}`),
    ),
    headers: fc.array(headerLine, { maxLength: 6 }),
    body: fc.oneof(
      fc.constant('{"jsonrpc":"2.0","id":1,"method":"tools/list"}'),
      fc.json({ maxDepth: 2 }),
      fc.stringMatching(/^[ -~]{0,64}$/),
    ),
    declared: fc.option(fc.integer({ min: 0, max: 200 }), { nil: undefined }),
  })
  .map(
    (r) =>
      `${r.method} ${r.path} HTTP/1.1\r\nHost: runtime\r\n${r.headers.join('')}` +
      `Content-Length: ${r.declared ?? Buffer.byteLength(r.body)}\r\n\r\n${r.body}`,
  );

const caseArb: fc.Arbitrary<RelayCase> = fc.oneof(
  {
    weight: 2,
    arbitrary: fc
      .record({
        path: fc.oneof(
          fc.constant('/api/relay/r0'),
          token.map((t) => `/api/relay/${encodeURIComponent(t)}`),
          token.map((t) => `/api/relay/${t}`),
        ),
        upgrade: fc.oneof(fc.constant('switchyard-relay'), token),
      })
      .map((r) => ({ kind: 'ask' as const, ...r })),
  },
  {
    weight: 5,
    arbitrary: fc
      .oneof(
        fc.array(httpRequest, { minLength: 1, maxLength: 3 }).map((rs) => rs.join('')),
        fc.uint8Array({ minLength: 1, maxLength: 256 }).map((b) => Buffer.from(b).toString('latin1')),
      )
      .map((text) => ({ kind: 'bytes' as const, bytes: Buffer.from(text, 'latin1').toString('base64') })),
  },
);

/** Waits up to CLOSE_WAIT_MS for `socket` to close, then destroys it. */
async function settle(socket: net.Socket): Promise<void> {
  await new Promise<void>((resolve) => {
    const timer = setTimeout(resolve, CLOSE_WAIT_MS);
    socket.once('close', () => (clearTimeout(timer), resolve()));
    socket.resume();
  });
  socket.destroy();
}

/** The body of a refusal (its `error`, and the runtime it names), for a failure to say why. */
function refusalOf(text: string): { error?: string; runtime?: string } {
  try {
    return JSON.parse(text.slice(text.indexOf('\r\n\r\n') + 4)) as { error?: string; runtime?: string };
  } catch {
    return {};
  }
}

/**
 * What is wrong with the answer to an ask, if anything. r0's tunnel is held
 * here, so a well-formed ask for it is granted; the one server error an ask
 * may get is the refusal of a runtime that has no tunnel here, naming it.
 */
function judgeAsk(c: RelayCase & { kind: 'ask' }, status: number, text: string): string | undefined {
  if (status === 0) return 'no answer to a relay request';
  const refusal = refusalOf(text);
  const said = `${status} ${JSON.stringify(refusal)}`;
  if (c.path === '/api/relay/r0' && c.upgrade === RELAY.upgrade && status !== 101)
    return `relay to r0 answered ${said}`;
  const elsewhere = status === 502 && refusal.error === PROXY_ERRORS.notConnected && refusal.runtime !== 'r0';
  if (status >= 500 && !elsewhere) return `relay request answered ${said}`;
  return undefined;
}

async function runCase(port: number, c: RelayCase): Promise<string | undefined> {
  if (c.kind === 'ask') {
    const { status, text, socket } = await askRelay(port, c.path, c.upgrade);
    const failure = judgeAsk(c, status, text);
    if (failure !== undefined) {
      socket.destroy();
      return failure;
    }
    await settle(socket);
    return undefined;
  }
  const { status, text, socket } = await askRelay(port, '/api/relay/r0');
  if (status !== 101) {
    socket.destroy();
    return `relay to r0 answered ${status} ${JSON.stringify(refusalOf(text))}`;
  }
  socket.end(Buffer.from(c.bytes, 'base64'));
  await settle(socket);
  return undefined;
}

describe('fuzz: relay connections into a runtime', () => {
  let cluster: FuzzCluster;
  before(async () => {
    cluster = await startFuzzCluster(1);
  });
  after(() => cluster?.close());

  for (const { note, input } of RELAY_REGRESSIONS) {
    it(`regression: ${note}`, async () => {
      const port = Number(new URL(cluster.replicas[0]!.url).port);
      assert.equal(await runCase(port, input), undefined);
      await cluster.assertHealthy();
    });
  }

  it(`answers ${CASES} arbitrary relay requests and relayed byte streams, and still serves MCP on a relay`, async () => {
    const port = Number(new URL(cluster.replicas[0]!.url).port);
    const cases = fc.sample(caseArb, { numRuns: CASES, seed: FUZZ_SEED });
    const started = performance.now();
    const failures = await runCases(cases, PARALLEL, (c) => runCase(port, c));
    console.log(`fuzz relay: ${cases.length} cases in ${((performance.now() - started) / 1000).toFixed(1)} s`);
    assert.equal(failures.length, 0, describeFailures(failures));
    await cluster.assertHealthy();
    const { status, socket } = await askRelay(port, '/api/relay/r0');
    assert.equal(status, 101);
    try {
      const body = JSON.stringify({
        jsonrpc: '2.0',
        id: 1,
        method: 'initialize',
        params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'fuzz', version: '1' } },
      });
      const answer = await exchangeRaw(
        socket,
        `POST /mcp HTTP/1.1\r\nHost: runtime\r\nContent-Type: application/json\r\n` +
          `Accept: application/json, text/event-stream\r\nX-Switchyard-Class: demo\r\n` +
          `Content-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
      );
      assert.equal(answer.status, 200, answer.head);
      assert.match(answer.body, /"serverInfo"/);
    } finally {
      socket.destroy();
    }
  });
});
