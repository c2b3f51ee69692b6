// `switchyard check gateway` against stand-ins on loopback answering as a
// gateway might: it passes only on /readyz 200 and an initialize result (in
// JSON or in an SSE event), or on a Bearer challenge where auth is expected,
// ends the session it opened, and says what else it got. A scheduler's and a
// runtime's direct listener are told apart from a gateway by their answers.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { startRuntimeNode } from '@switchyard/runtime';
import { createMetrics } from '@switchyard/service';
import { runCli, startOneReplica } from './support.ts';

const RESULT = { jsonrpc: '2.0', id: 1, result: { protocolVersion: '2025-06-18', serverInfo: { name: 'stand-in' } } };

type Answer = (req: IncomingMessage, res: ServerResponse) => void;

/** `switchyard check gateway` of the MCP endpoint `url`, with `flags`. */
const checkGateway = (url: string, ...flags: string[]) => runCli(['check', 'gateway', '--gateway', url, ...flags]);

describe('switchyard check gateway', () => {
  let server: Server;
  let url: string;
  let answer: Answer;
  let ready = 200;
  const deleted: string[] = [];
  before(async () => {
    server = createServer((req, res) => {
      req.resume();
      if (req.url === '/readyz') return void res.writeHead(ready).end(ready === 200 ? 'ok' : 'draining');
      if (req.method === 'DELETE') {
        deleted.push(String(req.headers['mcp-session-id']));
        return void res.writeHead(200).end();
      }
      req.once('end', () => answer(req, res));
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/mcp`;
  });
  after(() => new Promise<void>((resolve) => server.close(() => resolve())));

  const check = (...flags: string[]) => checkGateway(url, ...flags);

  it('passes on an initialize result in an SSE event, and ends the session it opened', async () => {
    ready = 200;
    answer = (_req, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream', 'mcp-session-id': 'sess-1' });
      // The stream stays open after the event: the check does not wait for its end.
      res.write(`event: message\ndata: ${JSON.stringify(RESULT)}\n\n`);
    };
    const { code, stdout, stderr } = await check();
    assert.equal(code, 0, stderr);
    assert.match(stdout, /^gateway ok: \/readyz 200, initialize 200 at .*\(stand-in, protocol 2025-06-18\)/);
    assert.deepEqual(deleted, ['sess-1']);
  });

  it('fails a 200 that holds no initialize result: whatever answered is no MCP server', async () => {
    answer = (_req, res) => res.writeHead(200, { 'content-type': 'text/html' }).end('<!DOCTYPE html>');
    const { code, stderr } = await check();
    assert.equal(code, 1);
    assert.match(stderr, /answered initialize 200 with no initialize result/);
  });

  it("fails an error answer, naming the gateway's reason", async () => {
    answer = (_req, res) =>
      res.writeHead(503, { 'content-type': 'application/json' }).end(
        JSON.stringify({
          jsonrpc: '2.0',
          id: null,
          error: { code: -32000, message: 'no runtime serves class demo' },
        }),
      );
    const { code, stderr } = await check();
    assert.equal(code, 1);
    assert.match(stderr, /initialize at .* answered HTTP 503: no runtime serves class demo/);
  });

  it("reports a gateway's own 404 by its reason: the endpoint is one, the request went wrong", async () => {
    answer = (_req, res) =>
      res
        .writeHead(404, { 'content-type': 'application/json' })
        .end(JSON.stringify({ jsonrpc: '2.0', id: null, error: { code: -32001, message: 'Not found: a reason' } }));
    const { code, stderr } = await check();
    assert.equal(code, 1);
    assert.match(stderr, /initialize at .* answered HTTP 404: Not found: a reason/);
  });

  it('with --auth-required, passes on a Bearer challenge and fails a 401 without one', async () => {
    answer = (_req, res) => res.writeHead(401, { 'www-authenticate': 'Bearer realm="switchyard"' }).end();
    const challenged = await check('--auth-required');
    assert.equal(challenged.code, 0, challenged.stderr);
    assert.match(challenged.stdout, /asks for credentials \(401, Bearer realm="switchyard"\)/);
    const unasked = await check();
    assert.equal(unasked.code, 1);
    // Said as what to do: a newcomer who ran the check with no flags told it nothing about auth.
    assert.match(unasked.stderr, /asks for credentials \(401\): its client auth is on; check it with --auth-required/);
    answer = (_req, res) => res.writeHead(401).end();
    const bare = await check('--auth-required');
    assert.equal(bare.code, 1);
    assert.match(bare.stderr, /answered 401 without a Bearer challenge/);
  });

  it('fails when /readyz is not 200', async () => {
    ready = 503;
    const { code, stderr } = await check();
    ready = 200;
    assert.equal(code, 1);
    assert.match(stderr, /\/readyz answered HTTP 503: draining/);
  });
});

describe('switchyard check gateway given a scheduler', () => {
  it("says the address may be no gateway's MCP endpoint, and where a scheduler's goes", async () => {
    const replica = await startOneReplica({ joinTokens: () => ['join-token-for-this-test'] });
    try {
      const { code, stdout, stderr } = await checkGateway(`${replica.url}/mcp`);
      assert.equal(code, 1);
      assert.equal(stdout, '');
      assert.match(
        stderr,
        /answered 404 for \/mcp: is this a gateway's MCP endpoint\? \(a scheduler's address goes to check scheduler --scheduler\)/,
      );
    } finally {
      await replica.close();
    }
  });
});

describe('switchyard check gateway given a scheduler with API tokens', () => {
  // Its /mcp is no route, but its API tokens refuse every request first: 401 with its own challenge.
  it("says it is no gateway's MCP endpoint, with or without --auth-required", async () => {
    const replica = await startOneReplica({ joinTokens: () => [], apiTokens: () => ['api-token-for-this-test'] });
    try {
      for (const flags of [[], ['--auth-required']]) {
        const { code, stdout, stderr } = await checkGateway(`${replica.url}/mcp`, ...flags);
        assert.equal(code, 1, `${flags.join(' ')}: ${stdout}`);
        assert.equal(stdout, '');
        assert.doesNotMatch(stderr, /check it with --auth-required/);
        assert.match(
          stderr,
          /answered 401 with a scheduler's challenge \(realm switchyard-scheduler\): it is no gateway's MCP endpoint \(a scheduler's address goes to check scheduler --scheduler\)/,
        );
      }
    } finally {
      await replica.close();
    }
  });
});

describe("switchyard check gateway given a runtime's direct listener", () => {
  // It serves /mcp itself, but only to gateways in direct mode: every request without one of its tokens, /readyz
  // first, gets 401 with its own challenge. That is no gateway refusing a client, and no missing credential.
  it("says it is a runtime's, no gateway's MCP endpoint, with or without --auth-required", async () => {
    const quiet = { debug() {}, info() {}, warn() {}, error() {} };
    const node = await startRuntimeNode({
      runtimeId: 'rt-direct',
      // Never reached: the direct listener serves whether the tunnel is up or not.
      schedulerUrl: 'http://127.0.0.1:1',
      joinToken: 'join-token-for-this-test',
      classes: { demo: { engine: 'builtin' } },
      sandboxesMax: 4,
      sessionIdleMs: 60_000,
      direct: { host: '127.0.0.1', port: 0, tokens: ['direct-token-for-this-test'] },
      logger: quiet,
      metrics: createMetrics('runtime'),
    });
    try {
      for (const flags of [[], ['--auth-required']]) {
        const { code, stdout, stderr } = await checkGateway(`${node.directUrl}/mcp`, ...flags);
        assert.equal(code, 1, `${flags.join(' ')}: ${stdout}`);
        assert.equal(stdout, '');
        assert.doesNotMatch(stderr, /bearer token is required|check it with --auth-required/);
        assert.match(
          stderr,
          /answered 401 with a runtime's challenge \(realm switchyard-runtime\): it is a runtime's direct listener, no gateway's MCP endpoint/,
        );
      }
    } finally {
      await node.close();
    }
  });
});
